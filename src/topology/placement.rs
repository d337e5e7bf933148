//! Placement of one pod group (a PodSet, or a leader + workers pair) on a topology tree,
//! exactly as Kueue's `findTopologyAssignment` chooses domains.
//!
//! Phases: derive the parameters from the request (levels, slices, profile); count what every
//! domain holds (`counting`); choose the level and the domains there (2a); descend to the
//! leaves, trimming counts to the request (2b). Balanced placement (gated) replaces 2a for
//! preferred requests when it finds a better spread (`balanced`).
//!
//! Invariants: the tree and the free capacity are only read; all scratch state lives in the
//! `Evaluation`; the result never assigns more than a leaf's counted capacity.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;

use super::capacity::FreeCapacity;
use super::counting::{DenseRequest, DomainCounts, aggregate};
use super::gates::FeatureGates;
use super::message::{Counted, Exclusions, NotFit};
use super::node;
use super::request::PodSetSpec;
use super::resources::with_pod_slot;
use super::tree::{DomainIdx, TopologyTree};

/// Where a group is placed and what it may use.
#[derive(Debug, Clone, Copy)]
pub struct PlacementContext<'a> {
    /// The flavor's tree.
    pub tree: &'a TopologyTree,
    /// Free capacity per leaf (already net of every other pod and plan).
    pub free: &'a FreeCapacity,
    /// Feature gates in force.
    pub gates: &'a FeatureGates,
    /// The ResourceFlavor's name (for messages).
    pub flavor_name: &'a str,
    /// The ResourceFlavor's tolerations, added to the pods' own.
    pub flavor_tolerations: &'a [Toleration],
}

/// One group to place: workers, an optional leader sharing their topology request, and an
/// optional domain every pod must stay inside (completing a partly placed group).
#[derive(Debug, Clone, Copy)]
pub struct GroupRequest<'a> {
    /// The workers' PodSet; its topology request governs the whole group.
    pub workers: &'a PodSetSpec,
    /// The leader's PodSet (count 1), placed with the workers.
    pub leader: Option<&'a PodSetSpec>,
    /// Only leaves inside this domain are candidates.
    pub within: Option<DomainIdx>,
}

/// Pods per lowest-level domain, sorted by the domain's label path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// (leaf, pods) with pods > 0.
    pub domains: Vec<(DomainIdx, i64)>,
}

/// The outcome of placing a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupPlacement {
    /// Where the workers go.
    pub workers: Assignment,
    /// Where the leader goes, when there is one.
    pub leader: Option<Assignment>,
}

/// The derived parameters of a request (Kueue's findTopologyAssignment preamble).
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub count: i64,
    pub leader_count: i64,
    pub slice_size: i64,
    pub slice_level: usize,
    pub level: usize,
    pub required: bool,
    pub unconstrained: bool,
    pub least_free: bool,
    pub balanced: bool,
    pub affinity: bool,
    pub size_at_level: BTreeMap<usize, i64>,
    /// (level index, size) for every slice layer, outermost first (for messages).
    pub layers: Vec<(usize, i64)>,
}

impl Params {
    fn best_fit(&self) -> bool {
        !self.least_free
    }
}

/// Places a group, or says why it does not fit in Kueue's words.
pub fn place_group(
    ctx: &PlacementContext<'_>,
    group: &GroupRequest<'_>,
) -> Result<GroupPlacement, NotFit> {
    let mut eval = Evaluation::new(ctx, group)?;
    if eval.p.count == 0 {
        return Ok(GroupPlacement {
            workers: Assignment::default(),
            leader: group.leader.map(|_| Assignment::default()),
        });
    }
    eval.fill_in_counts()?;
    let (level, domains, balanced) = match eval.try_balanced() {
        Some((level, domains)) => (level, domains, true),
        None => {
            let (level, domains) = eval.find_level_with_fit_domains(eval.p.level)?;
            (level, domains, false)
        }
    };
    let leaves = eval.descend(level, domains, balanced);
    Ok(eval.build(&leaves, group.leader.is_some()))
}

/// The leaves the group's workers may use at all: those inside its domain that pass the pods'
/// node filters (taints against their and the flavor's tolerations, nodeSelector, required
/// node affinity), whatever their free capacity. For messages about a group that does not fit.
pub fn eligible_leaves(
    ctx: &PlacementContext<'_>,
    group: &GroupRequest<'_>,
) -> Result<Vec<DomainIdx>, NotFit> {
    let eval = Evaluation::new(ctx, group)?;
    let filters = eval.node_filters()?;
    Ok(ctx
        .tree
        .leaves()
        .iter()
        .copied()
        .filter(|&leaf| {
            eval.node_filter_out(&filters, leaf).is_none() && !eval.outside_domain(leaf)
        })
        .collect())
}

/// The node filters of one evaluation, parsed once.
struct NodeFilters {
    tolerations: Vec<Toleration>,
    required: Option<node::RequiredAffinity>,
    preferred: Option<node::PreferredAffinity>,
}

/// Why the node filters keep a group off a leaf.
enum FilteredOut {
    /// A hostname leaf without its node (never counted, never excluded).
    NoNode,
    /// An untolerated taint, as `key=value:Effect`.
    Taint(String),
    /// The pods' nodeSelector does not match the node.
    NodeSelector,
    /// Their required node affinity does not match the node.
    Affinity,
}

/// Scratch state of one evaluation.
pub(crate) struct Evaluation<'a> {
    pub ctx: PlacementContext<'a>,
    pub group: GroupRequest<'a>,
    pub p: Params,
    pub counts: Vec<DomainCounts>,
    pub exclusions: Exclusions,
    requests: DenseRequest,
    leader_requests: Option<DenseRequest>,
}

fn level_not_specified() -> NotFit {
    NotFit::plain("topology level not specified")
}

impl<'a> Evaluation<'a> {
    fn new(ctx: &PlacementContext<'a>, group: &GroupRequest<'a>) -> Result<Self, NotFit> {
        let tree = ctx.tree;
        let w = group.workers;
        let empty = Default::default();
        let tr = w.topology.as_ref().unwrap_or(&empty);
        let layers_req = &tr.slice_layers;
        let slice_size = match layers_req.first() {
            Some(l) if l.size <= 0 => {
                return Err(NotFit::plain(
                    "slice topology requested, but slice size not provided",
                ));
            }
            Some(l) => i64::from(l.size),
            None => 1,
        };
        let required = tr.required.is_some();
        let slice_only = tr.required.is_none() && tr.preferred.is_none() && !layers_req.is_empty();
        let unconstrained = tr.unconstrained == Some(true) || w.implied || slice_only;
        let lowest = tree.levels.last().cloned();
        let key = if let Some(r) = &tr.required {
            r.clone()
        } else if let Some(p) = &tr.preferred {
            p.clone()
        } else if slice_only {
            tree.levels
                .first()
                .cloned()
                .ok_or_else(level_not_specified)?
        } else if tr.unconstrained == Some(true) || w.implied {
            lowest.clone().ok_or_else(level_not_specified)?
        } else {
            return Err(level_not_specified());
        };
        let level = tree
            .level_index(&key)
            .ok_or_else(|| NotFit::plain(format!("no requested topology level: {key}")))?;
        let slice_key = match layers_req.first() {
            Some(l) => l.level.clone(),
            None => lowest.unwrap_or_default(),
        };
        let slice_level = tree.level_index(&slice_key).ok_or_else(|| {
            NotFit::plain(format!(
                "no requested topology level for slices: {slice_key}"
            ))
        })?;
        if level > slice_level {
            return Err(NotFit::plain(format!(
                "podset slice topology {slice_key} is above the podset topology {key}"
            )));
        }
        let mut size_at_level = BTreeMap::new();
        let mut layers = vec![(slice_level, slice_size)];
        let (mut prev_size, mut prev_level) = (slice_size, slice_level);
        for inner in layers_req.iter().skip(1) {
            let lvl = tree.level_index(&inner.level).ok_or_else(|| {
                NotFit::plain(format!(
                    "no requested topology level for additional slice layer: {}",
                    inner.level
                ))
            })?;
            if lvl <= prev_level {
                return Err(NotFit::plain(format!(
                    "additional slice layer topology {} must be at a lower level than {}",
                    inner.level, tree.levels[prev_level]
                )));
            }
            let size = i64::from(inner.size);
            if size <= 0 || prev_size % size != 0 {
                return Err(NotFit::plain(format!(
                    "additional slice layer size {size} must evenly divide parent layer size {prev_size}"
                )));
            }
            for l in prev_level + 1..=lvl {
                size_at_level.insert(l, size);
            }
            layers.push((lvl, size));
            prev_size = size;
            prev_level = lvl;
        }
        let gates = ctx.gates;
        let least_free = unconstrained && gates.profile_mixed();
        let p = Params {
            count: i64::from(w.count.max(0)),
            leader_count: i64::from(group.leader.is_some()),
            slice_size,
            slice_level,
            level,
            required,
            unconstrained,
            least_free,
            balanced: gates.balanced_placement() && !required && !unconstrained,
            affinity: gates.respect_preferred_affinity(),
            size_at_level,
            layers,
        };
        Ok(Self {
            ctx: *ctx,
            group: *group,
            counts: vec![DomainCounts::default(); tree.domains.len()],
            exclusions: Exclusions::default(),
            requests: DenseRequest::new(tree, &with_pod_slot(&w.requests)),
            leader_requests: group
                .leader
                .map(|l| DenseRequest::new(tree, &with_pod_slot(&l.requests))),
            p,
        })
    }

    /// The node filters of the workers' pods: tolerations (theirs and the flavor's) and the
    /// node affinity, parsed once per evaluation. Affinity applies only where leaves are nodes.
    fn node_filters(&self) -> Result<NodeFilters, NotFit> {
        let tree = self.ctx.tree;
        let w = self.group.workers;
        let mut tolerations: Vec<Toleration> = w.tolerations.clone();
        tolerations.extend(self.ctx.flavor_tolerations.iter().cloned());
        let required = match &w.required_affinity {
            Some(aff) if tree.hostname_lowest => {
                Some(node::RequiredAffinity::parse(aff).map_err(|e| {
                    NotFit::plain(format!(
                        "invalid affinity node selectors: {aff:?}, reason: {e}"
                    ))
                })?)
            }
            _ => None,
        };
        let preferred =
            if tree.hostname_lowest && self.p.affinity && !w.preferred_affinity.is_empty() {
                Some(
                    node::PreferredAffinity::parse(&w.preferred_affinity).map_err(|e| {
                        NotFit::plain(format!("invalid preferred node affinity terms: {e}"))
                    })?,
                )
            } else {
                None
            };
        Ok(NodeFilters {
            tolerations,
            required,
            preferred,
        })
    }

    /// Why the node filters keep the workers off a leaf (Kueue's order: taints, nodeSelector,
    /// required affinity), or `None` when they pass it. Leaves that are not nodes pass.
    fn node_filter_out(&self, filters: &NodeFilters, leaf: DomainIdx) -> Option<FilteredOut> {
        let tree = self.ctx.tree;
        if !tree.hostname_lowest {
            return None;
        }
        let Some(n) = tree.leaf_node(leaf) else {
            return Some(FilteredOut::NoNode);
        };
        if let Some(taint) = node::first_untolerated_taint(&n.taints, &filters.tolerations) {
            return Some(FilteredOut::Taint(node::taint_to_string(taint)));
        }
        if !node::matches_node_selector(&n.labels, &self.group.workers.node_selector) {
            return Some(FilteredOut::NodeSelector);
        }
        if let Some(aff) = &filters.required
            && !aff.matches(n)
        {
            return Some(FilteredOut::Affinity);
        }
        None
    }

    /// The leaf lies outside the domain the group must stay in.
    fn outside_domain(&self, leaf: DomainIdx) -> bool {
        let tree = self.ctx.tree;
        self.group
            .within
            .is_some_and(|within| tree.ancestor_at(leaf, tree.domains[within].level) != within)
    }

    /// Phase 1: counts at the leaves (after the node filters), then up the tree.
    fn fill_in_counts(&mut self) -> Result<(), NotFit> {
        let tree = self.ctx.tree;
        let filters = self.node_filters()?;
        for &leaf in tree.leaves() {
            self.exclusions.total_nodes += 1;
            match self.node_filter_out(&filters, leaf) {
                Some(FilteredOut::NoNode) => continue,
                Some(FilteredOut::Taint(taint)) => {
                    *self.exclusions.taints.entry(taint).or_default() += 1;
                    continue;
                }
                Some(FilteredOut::NodeSelector) => {
                    self.exclusions.node_selector += 1;
                    continue;
                }
                Some(FilteredOut::Affinity) => {
                    self.exclusions.affinity += 1;
                    continue;
                }
                None => {}
            }
            if let Some(pref) = &filters.preferred
                && let Some(n) = tree.leaf_node(leaf)
            {
                self.counts[leaf].affinity = pref.score(n);
            }
            if self.outside_domain(leaf) {
                self.exclusions.topology_domain += 1;
                continue;
            }
            let mut free = self.ctx.free.remaining(leaf).to_vec();
            let (pods, limiting) = self.requests.count_in(&free);
            if pods == 0
                && let Some(r) = limiting
            {
                *self.exclusions.resources.entry(r.to_string()).or_default() += 1;
            }
            let c = &mut self.counts[leaf];
            c.pods = pods;
            c.pods_with_leader = pods;
            if let Some(lr) = &self.leader_requests
                && lr.count_in(&free).0 > 0
            {
                c.leaders = 1;
                lr.subtract_from(&mut free);
                c.pods_with_leader = self.requests.count_in(&free).0;
            }
        }
        aggregate(
            tree,
            &mut self.counts,
            self.p.slice_level,
            self.p.slice_size,
            &self.p.size_at_level,
            self.p.leader_count > 0,
        );
        Ok(())
    }

    /// Capacity of a domain in slices or pods, with or without the leader.
    pub fn cap(&self, d: DomainIdx, slices: bool, with_leader: bool) -> i64 {
        let c = &self.counts[d];
        match (slices, with_leader) {
            (true, false) => c.slices,
            (true, true) => c.slices_with_leader,
            (false, false) => c.pods,
            (false, true) => c.pods_with_leader,
        }
    }

    /// Kueue's `sortedDomains` / `sortedDomainsWithLeader`.
    pub fn sort_domains(&self, ds: &mut [DomainIdx], with_leader: bool) {
        let tree = self.ctx.tree;
        let least_free = self.p.least_free;
        let affinity = self.p.affinity;
        ds.sort_by(|&a, &b| {
            let (ca, cb) = (&self.counts[a], &self.counts[b]);
            let mut o = Ordering::Equal;
            if with_leader {
                o = cb.leaders.cmp(&ca.leaders);
            }
            if o == Ordering::Equal && affinity {
                o = cb.affinity.cmp(&ca.affinity);
            }
            if o == Ordering::Equal {
                let (sa, sb) = if with_leader {
                    (ca.slices_with_leader, cb.slices_with_leader)
                } else {
                    (ca.slices, cb.slices)
                };
                o = if least_free { sa.cmp(&sb) } else { sb.cmp(&sa) };
            }
            if o == Ordering::Equal {
                o = if with_leader {
                    ca.pods_with_leader.cmp(&cb.pods_with_leader)
                } else {
                    ca.pods.cmp(&cb.pods)
                };
            }
            o.then_with(|| cmp_values(tree, a, b))
        });
    }

    /// Kueue's `findBestFit…`: the first candidate with the smallest capacity ≥ `needed`.
    fn find_best_fit(
        &self,
        ds: &[DomainIdx],
        needed: i64,
        leaders: i64,
        slices: bool,
    ) -> DomainIdx {
        let candidates = self.affinity_tier(ds);
        let mut best: Option<(DomainIdx, i64)> = None;
        for &c in candidates {
            if leaders > 0 && self.counts[c].leaders < leaders {
                continue;
            }
            let cap = self.cap(c, slices, leaders > 0);
            if cap >= needed && best.is_none_or(|(_, b)| cap < b) {
                best = Some((c, cap));
            }
        }
        best.map(|(d, _)| d).unwrap_or(candidates[0])
    }

    fn affinity_tier<'d>(&self, ds: &'d [DomainIdx]) -> &'d [DomainIdx] {
        if !self.p.affinity || ds.is_empty() {
            return ds;
        }
        let top = self.counts[ds[0]].affinity;
        let n = ds
            .iter()
            .take_while(|&&d| self.counts[d].affinity == top)
            .count();
        &ds[..n]
    }

    fn fits_whole(&self, d: DomainIdx, need: i64) -> bool {
        self.counts[d].slices_with_leader >= need && self.counts[d].leaders >= self.p.leader_count
    }

    /// Phase 2a: the level and the domains there (Kueue's `findLevelWithFitDomains`).
    fn find_level_with_fit_domains(&self, start: usize) -> Result<(usize, Vec<DomainIdx>), NotFit> {
        let tree = self.ctx.tree;
        let need = self.p.count / self.p.slice_size;
        let lc = self.p.leader_count;
        let mut lvl = start;
        loop {
            let mut sorted = tree.by_level[lvl].clone();
            if sorted.is_empty() {
                return Err(NotFit::plain(format!(
                    "no topology domains at level: {}",
                    tree.levels[lvl]
                )));
            }
            self.sort_domains(&mut sorted, true);
            let mut top = sorted[0];
            if self.p.best_fit() && self.fits_whole(top, need) {
                top = self.find_best_fit(&sorted, need, lc, true);
            }
            if self.p.least_free {
                for &d in &sorted {
                    if lc > 0 && self.counts[d].leaders < lc {
                        continue;
                    }
                    if self.cap(d, true, lc > 0) >= need {
                        return Ok((lvl, vec![d]));
                    }
                }
            }
            if self.fits_whole(top, need) {
                return Ok((lvl, vec![top]));
            }
            if self.p.required {
                if self.p.affinity
                    && let Some(i) = (1..sorted.len()).find(|&i| self.fits_whole(sorted[i], need))
                {
                    return Ok((lvl, vec![self.find_best_fit(&sorted[i..], need, lc, true)]));
                }
                return Err(self.not_fit(self.counts[top].slices, need, lvl));
            }
            if !self.p.unconstrained && lvl > 0 {
                lvl -= 1;
                continue;
            }
            return self.spread(lvl, sorted, need);
        }
    }

    /// Greedy over several domains of one level (preferred at the top, or unconstrained).
    fn spread(
        &self,
        lvl: usize,
        sorted: Vec<DomainIdx>,
        need: i64,
    ) -> Result<(usize, Vec<DomainIdx>), NotFit> {
        let lc = self.p.leader_count;
        let sorted =
            self.prioritize_leader_domain(sorted, self.p.count, lc, self.p.slice_size, true);
        let mut taken = Vec::new();
        let mut rem_slices = need;
        let mut rem_leaders = lc;
        let mut i = 0;
        while rem_leaders > 0 && i < sorted.len() && self.counts[sorted[i]].leaders > 0 {
            let mut d = sorted[i];
            if self.p.best_fit() && self.counts[d].slices_with_leader >= rem_slices {
                d = self.find_best_fit(&sorted[i..], rem_slices, rem_leaders, true);
            }
            taken.push(d);
            rem_leaders -= self.counts[d].leaders;
            rem_slices -= self.counts[d].slices_with_leader;
            i += 1;
        }
        if rem_leaders > 0 {
            return Err(self.not_fit(lc - rem_leaders, need, lvl));
        }
        let mut rest: Vec<DomainIdx> = sorted[i..].to_vec();
        self.sort_domains(&mut rest, false);
        let mut j = 0;
        while rem_slices > 0 && j < rest.len() {
            let mut d = rest[j];
            if self.p.best_fit() && self.counts[d].slices >= rem_slices {
                d = self.find_best_fit(&rest[j..], rem_slices, 0, true);
            }
            taken.push(d);
            rem_slices -= self.counts[d].slices;
            j += 1;
        }
        if rem_slices > 0 {
            return Err(self.not_fit(need - rem_slices, need, lvl));
        }
        Ok((lvl, taken))
    }

    /// Kueue's `updateCountsToMinimum`: trims the domains' counts to exactly the request.
    pub fn update_counts_to_minimum(
        &mut self,
        ds: Vec<DomainIdx>,
        count: i64,
        leaders: i64,
        unit: i64,
        slices: bool,
    ) -> Vec<DomainIdx> {
        let ds = self.prioritize_leader_domain(ds, count, leaders, unit, slices);
        let unit = if slices { unit } else { 1 };
        let mut rem = if slices { count / unit } else { count };
        let mut rem_l = leaders;
        let mut result = Vec::new();
        let best_fit = self.p.best_fit();
        for i in 0..ds.len() {
            let mut d = ds[i];
            if rem_l > 0 {
                if best_fit && self.cap(d, slices, true) >= rem && self.counts[d].leaders >= rem_l {
                    d = self.find_best_fit(&ds[i..], rem, rem_l, slices);
                }
                let c = &mut self.counts[d];
                let wl = if slices {
                    &mut c.slices_with_leader
                } else {
                    &mut c.pods_with_leader
                };
                if *wl >= rem && c.leaders >= rem_l {
                    *wl = rem;
                    c.leaders = rem_l;
                    if slices {
                        c.slices = rem;
                    }
                    c.pods = rem * unit;
                    result.push(d);
                    return result;
                }
                *wl = (*wl).min(rem);
                c.leaders = c.leaders.min(rem_l);
                let took = *wl;
                if slices {
                    c.slices = took;
                }
                c.pods = took * unit;
                rem_l -= c.leaders;
                rem -= took;
                result.push(d);
            } else {
                if best_fit && self.cap(d, slices, false) >= rem {
                    d = self.find_best_fit(&ds[i..], rem, 0, slices);
                }
                let c = &mut self.counts[d];
                c.leaders = 0;
                let have = if slices { c.slices } else { c.pods };
                if have >= rem {
                    c.pods = rem * unit;
                    if slices {
                        c.slices = rem;
                    }
                    result.push(d);
                    return result;
                }
                c.pods = have * unit;
                rem -= have;
                result.push(d);
            }
        }
        // Unreachable after a successful phase 2a (Kueue logs and returns nothing).
        Vec::new()
    }

    /// Kueue's `prioritizeLeaderDomain`: move to the front the first domain that can take the
    /// leader and still leave room for everything.
    fn prioritize_leader_domain(
        &self,
        ds: Vec<DomainIdx>,
        count: i64,
        leaders: i64,
        unit: i64,
        slices: bool,
    ) -> Vec<DomainIdx> {
        if leaders == 0 || ds.len() < 2 {
            return ds;
        }
        let required = if slices { count / unit } else { count };
        let available: i64 = ds.iter().map(|&d| self.cap(d, slices, false)).sum();
        let mut ds = ds;
        let pick = ds.iter().position(|&d| {
            self.counts[d].leaders >= leaders
                && available - (self.cap(d, slices, false) - self.cap(d, slices, true)) >= required
        });
        if let Some(i) = pick.filter(|&i| i > 0) {
            let d = ds.remove(i);
            ds.insert(0, d);
        }
        ds
    }

    /// Phase 2b: from the fit level down to the leaves.
    pub fn descend(
        &mut self,
        level: usize,
        domains: Vec<DomainIdx>,
        balanced: bool,
    ) -> Vec<DomainIdx> {
        let tree = self.ctx.tree;
        let depth = tree.depth();
        let (count, lc, ss) = (self.p.count, self.p.leader_count, self.p.slice_size);
        let mut fit = if balanced {
            domains
        } else {
            self.update_counts_to_minimum(domains, count, lc, ss, true)
        };
        let mut lvl = level;
        if !balanced {
            while lvl < self.p.slice_level.min(depth - 1) {
                let mut pool: Vec<DomainIdx> = fit
                    .iter()
                    .flat_map(|&d| tree.domains[d].children.clone())
                    .collect();
                self.sort_domains(&mut pool, false);
                fit = self.update_counts_to_minimum(pool, count, lc, ss, true);
                lvl += 1;
            }
        }
        while lvl + 1 < depth {
            let unit = if lvl < self.p.slice_level {
                ss
            } else {
                self.p.size_at_level.get(&(lvl + 1)).copied().unwrap_or(1)
            };
            let mut next = Vec::new();
            for &p in &fit {
                let mut kids: Vec<DomainIdx> = tree.domains[p].children.clone().collect();
                self.sort_domains(&mut kids, false);
                if unit > 1 {
                    for &k in &kids {
                        let c = &mut self.counts[k];
                        c.slices = c.pods / unit;
                        c.slices_with_leader = c.pods_with_leader / unit;
                    }
                }
                let (pc, pl) = (self.counts[p].pods, self.counts[p].leaders);
                next.extend(self.update_counts_to_minimum(kids, pc, pl, unit, unit > 1));
            }
            fit = next;
            lvl += 1;
        }
        fit
    }

    fn build(&self, leaves: &[DomainIdx], has_leader: bool) -> GroupPlacement {
        let tree = self.ctx.tree;
        let mut sorted = leaves.to_vec();
        sorted.sort_by(|&a, &b| cmp_values(tree, a, b));
        let workers = Assignment {
            domains: sorted
                .iter()
                .filter(|&&d| self.counts[d].pods > 0)
                .map(|&d| (d, self.counts[d].pods))
                .collect(),
        };
        let leader = has_leader.then(|| Assignment {
            domains: sorted
                .iter()
                .filter(|&&d| self.counts[d].leaders > 0)
                .map(|&d| (d, self.counts[d].leaders))
                .collect(),
        });
        GroupPlacement { workers, leader }
    }

    /// A "does not fit" in Kueue's words, for `fit` out of `need` units at search level `lvl`.
    pub fn not_fit(&self, fit: i64, need: i64, lvl: usize) -> NotFit {
        let tree = self.ctx.tree;
        let name = &tree.topology_name;
        let mut counted = None;
        let mut msg = if self.p.layers.len() >= 2 {
            let best = tree.by_level[lvl].iter().copied().max_by(|&a, &b| {
                self.counts[a]
                    .slices
                    .cmp(&self.counts[b].slices)
                    .then_with(|| cmp_values(tree, b, a))
            });
            let mut m = format!("topology \"{name}\" doesn't allow to fit");
            for &(layer_level, size) in &self.p.layers {
                let fit: i64 = best
                    .map(|b| {
                        tree.descendants_at(b, layer_level)
                            .iter()
                            .map(|&d| self.counts[d].pods / size)
                            .sum()
                    })
                    .unwrap_or(0);
                m.push_str(&format!(
                    "; {fit}/{} slice(s) fit on level {}",
                    self.p.count / size,
                    tree.levels[layer_level]
                ));
            }
            m
        } else {
            let unit = if self.p.slice_size == 1 {
                "pod"
            } else {
                "slice"
            };
            counted = Some(Counted { fit, need, unit });
            if fit == 0 {
                format!("topology \"{name}\" doesn't allow to fit any of {need} {unit}(s)")
            } else {
                format!("topology \"{name}\" allows to fit only {fit} out of {need} {unit}(s)")
            }
        };
        msg.push_str(&self.exclusions.suffix());
        NotFit {
            message: msg,
            counted,
        }
    }
}

/// Kueue's `cmpLevelValues`: element-wise by label path (precomputed as a per-level rank).
pub fn cmp_values(tree: &TopologyTree, a: DomainIdx, b: DomainIdx) -> Ordering {
    let (da, db) = (&tree.domains[a], &tree.domains[b]);
    if da.level == db.level {
        da.rank.cmp(&db.rank)
    } else {
        tree.path(a).cmp(tree.path(b))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use crate::topology::TopologyRequest;

    fn host(name: &str, block: &str, rack: &str, cpu: i64) -> crate::topology::NodeInfo {
        NodeBuilder::new(name)
            .block(block)
            .rack(rack)
            .cpu(cpu)
            .build()
    }

    #[test]
    fn best_fit_fills_largest_hosts_then_jumps_to_the_tightest() {
        // Worked example a: a rack with hosts 3,3,2,1 and 7 pods → 3,3,1.
        let nodes = [
            host("x1", "b1", "r1", 3),
            host("x2", "b1", "r1", 3),
            host("x3", "b1", "r1", 2),
            host("x4", "b1", "r1", 1),
        ];
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(7, 1, required(RACK)),
            &FeatureGates::default(),
        );
        assert_eq!(
            got,
            Ok(domains(&[
                ("b1/r1/x1", 3),
                ("b1/r1/x2", 3),
                ("b1/r1/x4", 1)
            ]))
        );
    }

    #[test]
    fn least_free_fills_the_smallest_hosts_first() {
        let nodes = [
            host("x1", "b1", "r1", 3),
            host("x2", "b1", "r1", 3),
            host("x3", "b1", "r1", 2),
            host("x4", "b1", "r1", 1),
        ];
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(7, 1, unconstrained()),
            &FeatureGates::default(),
        );
        assert_eq!(
            got,
            Ok(domains(&[
                ("b1/r1/x1", 3),
                ("b1/r1/x2", 1),
                ("b1/r1/x3", 2),
                ("b1/r1/x4", 1)
            ]))
        );
    }

    #[test]
    fn pooled_descent_prefers_the_rack_that_fits_alone() {
        // Worked example b.
        let nodes = [
            host("x3", "b1", "r1", 2),
            host("x5", "b1", "r2", 2),
            host("x1", "b1", "r3", 1),
            host("x6", "b1", "r3", 1),
            host("x2", "b1", "r3", 1),
            host("x4", "b1", "r3", 1),
        ];
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(4, 1, required(BLOCK)),
            &FeatureGates::default(),
        );
        let want = domains(&[
            ("b1/r3/x1", 1),
            ("b1/r3/x2", 1),
            ("b1/r3/x4", 1),
            ("b1/r3/x6", 1),
        ]);
        assert_eq!(got, Ok(want));
    }

    #[test]
    fn rack_slices_fill_small_hosts_first_below_the_slice_level() {
        // Worked example c, with and without an inner hostname layer of 2.
        let nodes = [
            host("x1", "b1", "r1", 1),
            host("x2", "b1", "r1", 4),
            host("x3", "b1", "r2", 3),
            host("x4", "b1", "r2", 4),
        ];
        let gates = FeatureGates::default();
        let ps = podset(8, 1, sliced(required(BLOCK), &[(RACK, 4)]));
        let want = domains(&[
            ("b1/r1/x1", 1),
            ("b1/r1/x2", 3),
            ("b1/r2/x3", 3),
            ("b1/r2/x4", 1),
        ]);
        assert_eq!(place(&[BLOCK, RACK, HOST], &nodes, &ps, &gates), Ok(want));
        let ps = podset(8, 1, sliced(required(BLOCK), &[(RACK, 4), (HOST, 2)]));
        let want = domains(&[("b1/r1/x2", 4), ("b1/r2/x3", 2), ("b1/r2/x4", 2)]);
        assert_eq!(place(&[BLOCK, RACK, HOST], &nodes, &ps, &gates), Ok(want));
    }

    #[test]
    fn host_slices_take_most_slices_then_best_fit() {
        // Worked example d.
        let nodes = [
            host("x3", "b1", "r1", 6),
            host("x5", "b1", "r1", 5),
            host("x1", "b1", "r1", 4),
            host("x6", "b1", "r1", 2),
        ];
        let ps = podset(12, 1, sliced(required(BLOCK), &[(HOST, 2)]));
        let want = domains(&[("b1/r1/x1", 4), ("b1/r1/x3", 6), ("b1/r1/x6", 2)]);
        assert_eq!(
            place(&[BLOCK, RACK, HOST], &nodes, &ps, &FeatureGates::default()),
            Ok(want)
        );
    }

    #[test]
    fn unconstrained_spreads_ascending_across_the_datacentre() {
        // Worked example e.
        let nodes = [
            host("x3", "b1", "r1", 4),
            host("x5", "b1", "r1", 1),
            host("x1", "b1", "r1", 1),
            host("x6", "b2", "r1", 2),
            host("x2", "b2", "r1", 1),
        ];
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(6, 1, unconstrained()),
            &FeatureGates::default(),
        );
        let want = domains(&[
            ("b1/r1/x1", 1),
            ("b1/r1/x3", 1),
            ("b1/r1/x5", 1),
            ("b2/r1/x2", 1),
            ("b2/r1/x6", 2),
        ]);
        assert_eq!(got, Ok(want));
    }

    #[test]
    fn required_that_does_not_fit_says_how_much_does() {
        let nodes = [host("x1", "b1", "r1", 2), host("x2", "b1", "r2", 3)];
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(4, 1, required(RACK)),
            &FeatureGates::default(),
        );
        assert_eq!(
            got,
            Err("topology \"default\" allows to fit only 3 out of 4 pod(s)".to_string())
        );
    }

    #[test]
    fn a_counted_failure_carries_its_counts() {
        let t = tree(
            &[BLOCK, RACK, HOST],
            &[host("x1", "b1", "r1", 2), host("x2", "b1", "r2", 3)],
        );
        let free = FreeCapacity::empty(&t);
        let gates = FeatureGates::default();
        let ctx = PlacementContext {
            tree: &t,
            free: &free,
            gates: &gates,
            flavor_name: "tas",
            flavor_tolerations: &[],
        };
        let ps = podset(4, 1, required(RACK));
        let group = GroupRequest {
            workers: &ps,
            leader: None,
            within: None,
        };
        let e = place_group(&ctx, &group).unwrap_err();
        assert_eq!(
            e.counted,
            Some(Counted {
                fit: 3,
                need: 4,
                unit: "pod"
            })
        );
        let ps = podset(1, 1, sliced(required(BLOCK), &[("nope", 1)]));
        let group = GroupRequest {
            workers: &ps,
            ..group
        };
        assert_eq!(place_group(&ctx, &group).unwrap_err().counted, None);
    }

    #[test]
    fn eligible_leaves_apply_the_node_filters_and_the_domain() {
        let pooled = |name: &str, rack: &str| {
            NodeBuilder::new(name)
                .block("b1")
                .rack(rack)
                .cpu(1)
                .label("pool", "a")
                .build()
        };
        let mut tainted = pooled("x2", "r1");
        tainted.taints.push(k8s_openapi::api::core::v1::Taint {
            key: "dedicated".into(),
            value: Some("ml".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
        let nodes = [
            pooled("x1", "r1"),
            tainted,
            host("x3", "b1", "r2", 1),
            pooled("x4", "r2"),
        ];
        let t = tree(&[BLOCK, RACK, HOST], &nodes);
        // Capacity plays no part: nothing is free.
        let free = FreeCapacity::zero(&t);
        let gates = FeatureGates::default();
        let ctx = PlacementContext {
            tree: &t,
            free: &free,
            gates: &gates,
            flavor_name: "tas",
            flavor_tolerations: &[],
        };
        let mut ps = podset(1, 1, required(RACK));
        ps.node_selector.insert("pool".into(), "a".into());
        let names = |ctx: &PlacementContext<'_>, within: Option<DomainIdx>| -> Vec<String> {
            let group = GroupRequest {
                workers: &ps,
                leader: None,
                within,
            };
            eligible_leaves(ctx, &group)
                .unwrap()
                .iter()
                .map(|&l| t.values(l).join("/"))
                .collect()
        };
        assert_eq!(names(&ctx, None), ["b1/r1/x1", "b1/r2/x4"]);
        let r2 = (0..t.domains.len())
            .find(|&d| t.values(d) == ["b1", "r2"])
            .unwrap();
        assert_eq!(names(&ctx, Some(r2)), ["b1/r2/x4"]);
        let tolerate = [k8s_openapi::api::core::v1::Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }];
        let tolerant = PlacementContext {
            flavor_tolerations: &tolerate,
            ..ctx
        };
        assert_eq!(names(&tolerant, None), ["b1/r1/x1", "b1/r1/x2", "b1/r2/x4"]);
    }

    #[test]
    fn preferred_climbs_then_spreads_over_roots() {
        let nodes = [
            host("x1", "b1", "r1", 2),
            host("x2", "b1", "r2", 2),
            host("x3", "b2", "r1", 3),
        ];
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(4, 1, preferred(RACK)),
            &FeatureGates::default(),
        );
        assert_eq!(got, Ok(domains(&[("b1/r1/x1", 2), ("b1/r2/x2", 2)])));
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(6, 1, preferred(RACK)),
            &FeatureGates::default(),
        );
        // Pooled racks: b2/r1 (3) first, then b1/r1 (2), then the best fit for the last pod.
        assert_eq!(
            got,
            Ok(domains(&[
                ("b1/r1/x1", 2),
                ("b1/r2/x2", 1),
                ("b2/r1/x3", 3)
            ]))
        );
    }

    #[test]
    fn balanced_placement_evens_out_a_rack() {
        let nodes = [host("h1", "b1", "r1", 10), host("h2", "b1", "r1", 10)];
        let mut gates = FeatureGates::default();
        gates.set("TASBalancedPlacement", true).unwrap();
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(12, 1, preferred(RACK)),
            &gates,
        );
        assert_eq!(got, Ok(domains(&[("b1/r1/h1", 6), ("b1/r1/h2", 6)])));
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(12, 1, preferred(RACK)),
            &FeatureGates::default(),
        );
        assert_eq!(got, Ok(domains(&[("b1/r1/h1", 10), ("b1/r1/h2", 2)])));
    }

    #[test]
    fn no_domains_at_level_and_missing_levels_use_kueues_words() {
        let nodes = [host("x1", "b1", "r1", 2).clone()];
        let mut n = nodes[0].clone();
        n.ready = false;
        let got = place(
            &[BLOCK, RACK, HOST],
            &[n],
            &podset(1, 1, required(HOST)),
            &FeatureGates::default(),
        );
        assert_eq!(got, Err(format!("no topology domains at level: {HOST}")));
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(1, 1, sliced(required(BLOCK), &[("nope", 1)])),
            &FeatureGates::default(),
        );
        assert_eq!(
            got,
            Err("no requested topology level for slices: nope".to_string())
        );
        let got = place(
            &[BLOCK, RACK, HOST],
            &nodes,
            &podset(
                1,
                1,
                TopologyRequest {
                    unconstrained: Some(false),
                    ..Default::default()
                },
            ),
            &FeatureGates::default(),
        );
        assert_eq!(got, Err("topology level not specified".to_string()));
    }
}
