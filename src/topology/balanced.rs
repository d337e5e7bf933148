//! Balanced placement (`TASBalancedPlacement`, preferred requests only): spread a group evenly
//! one level below the preferred level, maximising the smallest share per domain (T), then
//! minimising the number of domains. Any failure falls back to BestFit, exactly as Kueue does.
//!
//! Kueue evaluates each candidate group on deep clones of its subtrees; here the same effect is
//! had by saving the counters of the group's subtrees, mutating them in place, and restoring
//! them, so that the shared counters are untouched when the fallback runs.

use std::collections::BTreeMap;

use super::counting::{DomainCounts, combine};
use super::placement::{Evaluation, cmp_values};
use super::tree::DomainIdx;

/// Result of Kueue's plain greedy evaluation (`evaluateGreedyAssignment`).
struct Greedy {
    fits: bool,
    domains: i64,
    last_with_leader: Option<DomainIdx>,
    last: Option<DomainIdx>,
}

/// Saved counters of a set of domains.
type Saved = Vec<(DomainIdx, DomainCounts)>;

impl Evaluation<'_> {
    /// The fit level and domains chosen by balanced placement, or `None` to fall back.
    pub(crate) fn try_balanced(&mut self) -> Option<(usize, Vec<DomainIdx>)> {
        if !self.p.balanced {
            return None;
        }
        let tree = self.ctx.tree;
        let level = self.p.level;
        let need = self.p.count / self.p.slice_size;
        let leaders = self.p.leader_count;
        let groups: Vec<Vec<DomainIdx>> = if level == 0 {
            vec![tree.by_level[0].clone()]
        } else {
            tree.by_level[level - 1]
                .iter()
                .map(|&p| tree.domains[p].children.clone().collect())
                .collect()
        };
        let mut best: Option<(i64, i64, Vec<DomainIdx>, Saved)> = None;
        for group in groups {
            let saved = self.save_subtrees(&group);
            let lower: Vec<DomainIdx> = group.iter().flat_map(|&g| self.lower(g)).collect();
            let g = self.greedy(&lower, need, leaders);
            let best_t = best.as_ref().map_or(0, |b| b.0);
            if g.fits {
                let mut t = need / g.domains.max(1);
                if let Some(l) = g.last_with_leader {
                    t = t.min(self.counts[l].slices_with_leader);
                }
                if let Some(l) = g.last {
                    t = t.min(self.counts[l].slices);
                }
                let t_lr = match g.last {
                    Some(l) if leaders > 0 => t.min(self.counts[l].slices_with_leader),
                    _ => t,
                };
                if t >= best_t {
                    self.prune(&group, t);
                    let mut eval = self.greedy(&group, need, leaders);
                    let mut accepted_t = Some(t);
                    if !eval.fits && t_lr < t {
                        if t_lr <= 0 || t_lr < best_t {
                            accepted_t = None;
                        } else {
                            self.restore(&saved);
                            self.prune(&group, t_lr);
                            eval = self.greedy(&group, need, leaders);
                            accepted_t = Some(t_lr);
                        }
                    }
                    if let Some(t) = accepted_t.filter(|_| eval.fits) {
                        let best_m = best.as_ref().map_or(i64::MAX, |b| b.1);
                        if t > best_t || (t == best_t && eval.domains < best_m) {
                            let snapshot = self.save_subtrees(&group);
                            best = Some((t, eval.domains, group.clone(), snapshot));
                        }
                    }
                }
            }
            self.restore(&saved);
        }
        let (t, _, group, snapshot) = best.filter(|b| b.0 > 0)?;
        let original = self.save_subtrees(&group);
        self.restore(&snapshot);
        match self.apply_balanced(&group, t, need, leaders) {
            Some(found) => Some(found),
            None => {
                self.restore(&original);
                None
            }
        }
    }

    /// Step B: choose the domains and hand out T slices each, extra slices to the front.
    fn apply_balanced(
        &mut self,
        best: &[DomainIdx],
        t: i64,
        need: i64,
        leaders: i64,
    ) -> Option<(usize, Vec<DomainIdx>)> {
        let tree = self.ctx.tree;
        let (candidates, fit_level) = if self.p.level < self.p.slice_level {
            let r = self.optimal_set(best, need, leaders, true);
            if r.is_empty() {
                return None;
            }
            let kids: Vec<DomainIdx> = r
                .iter()
                .flat_map(|&d| tree.domains[d].children.clone())
                .collect();
            (kids, self.p.level + 1)
        } else {
            (best.to_vec(), self.p.level)
        };
        let mut chosen = self.optimal_set(&candidates, need, leaders, false);
        if chosen.is_empty() {
            return None;
        }
        let n = chosen.len() as i64;
        if need < n * t {
            return None;
        }
        self.sort_domains(&mut chosen, true);
        let mut extra = need - n * t;
        let mut rem_leaders = leaders;
        for &d in &chosen {
            let c = &mut self.counts[d];
            let take = if rem_leaders > 0 {
                c.leaders = 1;
                rem_leaders -= 1;
                (c.slices_with_leader - t).min(extra)
            } else {
                c.leaders = 0;
                if extra > 0 {
                    (c.slices - t).min(extra)
                } else {
                    0
                }
            };
            c.slices = t + take;
            c.slices_with_leader = t + take;
            c.pods = (t + take) * self.p.slice_size;
            c.pods_with_leader = c.pods - c.leaders;
            extra -= take;
        }
        if extra > 0 || rem_leaders > 0 {
            return None;
        }
        Some((fit_level, chosen))
    }

    /// `lower(X)`: X's children when the preferred level is above the slice level, else X.
    fn lower(&self, d: DomainIdx) -> Vec<DomainIdx> {
        if self.p.level < self.p.slice_level {
            self.ctx.tree.domains[d].children.clone().collect()
        } else {
            vec![d]
        }
    }

    fn greedy(&self, ds: &[DomainIdx], need: i64, leaders: i64) -> Greedy {
        let mut rem_slices = need;
        let mut rem_leaders = leaders;
        let mut out = Greedy {
            fits: false,
            domains: 0,
            last_with_leader: None,
            last: None,
        };
        let mut rest: Vec<DomainIdx> = ds.to_vec();
        if rem_leaders > 0 {
            let mut sorted = ds.to_vec();
            self.sort_domains(&mut sorted, true);
            let mut used = 0;
            for &d in &sorted {
                if rem_leaders <= 0 || self.counts[d].leaders <= 0 {
                    break;
                }
                out.domains += 1;
                out.last_with_leader = Some(d);
                rem_leaders -= self.counts[d].leaders;
                rem_slices -= self.counts[d].slices_with_leader;
                used += 1;
            }
            rest = sorted[used..].to_vec();
        }
        self.sort_domains(&mut rest, false);
        for &d in &rest {
            if rem_slices <= 0 || self.counts[d].slices <= 0 {
                break;
            }
            out.domains += 1;
            out.last = Some(d);
            rem_slices -= self.counts[d].slices;
        }
        out.fits = rem_slices <= 0 && rem_leaders <= 0;
        out
    }

    /// Zeroes the children (and then the members) of the group that hold fewer than T slices.
    fn prune(&mut self, group: &[DomainIdx], t: i64) {
        let tree = self.ctx.tree;
        let has_leader = self.p.leader_count > 0;
        for &g in group {
            let children = tree.domains[g].children.clone();
            for c in children.clone() {
                self.prune_one(c, t, has_leader);
            }
            if !children.is_empty() {
                let affinity = self.counts[g].affinity;
                let level = tree.domains[g].level;
                self.counts[g] = combine(
                    children.map(|c| self.counts[c]),
                    None,
                    level == self.p.slice_level,
                    self.p.slice_size,
                    has_leader,
                );
                self.counts[g].affinity = affinity;
            }
            self.prune_one(g, t, has_leader);
        }
    }

    fn prune_one(&mut self, d: DomainIdx, t: i64, has_leader: bool) {
        let c = self.counts[d];
        if c.slices < t {
            self.for_subtree(d, |c| {
                *c = DomainCounts {
                    affinity: c.affinity,
                    ..Default::default()
                };
            });
        } else if has_leader && c.leaders > 0 && c.slices_with_leader < t {
            self.for_subtree(d, |c| {
                c.leaders = 0;
                c.pods_with_leader = 0;
                c.slices_with_leader = 0;
            });
        }
    }

    fn for_subtree(&mut self, d: DomainIdx, f: impl Fn(&mut DomainCounts)) {
        for x in self.ctx.tree.subtree(&[d]) {
            f(&mut self.counts[x]);
        }
    }

    fn save_subtrees(&self, group: &[DomainIdx]) -> Saved {
        let tree = self.ctx.tree;
        tree.subtree(group)
            .into_iter()
            .map(|x| (x, self.counts[x]))
            .collect()
    }

    fn restore(&mut self, saved: &Saved) {
        for (d, c) in saved {
            self.counts[*d] = *c;
        }
    }

    /// Kueue's `selectOptimalDomainSetToFit`: among sets of the greedy size, the one that fits
    /// with the least total capacity (dynamic programme over (leaders left, pods left)).
    fn optimal_set(
        &self,
        ds: &[DomainIdx],
        need: i64,
        leaders: i64,
        entropy: bool,
    ) -> Vec<DomainIdx> {
        let tree = self.ctx.tree;
        let g = self.greedy(ds, need, leaders);
        if !g.fits {
            return Vec::new();
        }
        let k = g.domains as usize;
        let mut ordered = ds.to_vec();
        if entropy {
            let ent: BTreeMap<DomainIdx, f64> = ds.iter().map(|&d| (d, self.entropy(d))).collect();
            ordered.sort_by(|&a, &b| {
                let (ca, cb) = (&self.counts[a], &self.counts[b]);
                cb.leaders
                    .cmp(&ca.leaders)
                    .then(cb.slices_with_leader.cmp(&ca.slices_with_leader))
                    .then(ent[&b].total_cmp(&ent[&a]))
                    .then_with(|| cmp_values(tree, a, b))
            });
        } else {
            ordered.sort_by(|&a, &b| cmp_values(tree, a, b));
        }
        let mut layers: Vec<BTreeMap<(i64, i64), Vec<DomainIdx>>> = vec![BTreeMap::new(); k + 1];
        layers[0].insert((leaders, need * self.p.slice_size), Vec::new());
        for &d in &ordered {
            let c = self.counts[d];
            for i in (1..=k).rev() {
                let (before, after) = layers.split_at_mut(i);
                for (&(l_left, p_left), prev) in &before[i - 1] {
                    if l_left <= 0 && p_left <= 0 {
                        continue;
                    }
                    let mut push = |key: (i64, i64)| {
                        after[0].entry(key).or_insert_with(|| {
                            let mut v = prev.clone();
                            v.push(d);
                            v
                        });
                    };
                    if l_left > 0 && c.leaders > 0 {
                        push((l_left - c.leaders, p_left - c.pods_with_leader));
                    }
                    if c.slices > 0 {
                        push((l_left, p_left - c.pods));
                    }
                }
            }
        }
        layers[k]
            .iter()
            .filter(|((l, p), _)| *l == 0 && *p <= 0)
            .max_by_key(|((_, p), _)| *p)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// Shannon entropy (bits) of the children's pod counts.
    fn entropy(&self, d: DomainIdx) -> f64 {
        let kids = self.ctx.tree.domains[d].children.clone();
        let total: i64 = kids.clone().map(|k| self.counts[k].pods.max(0)).sum();
        if total <= 0 {
            return 0.0;
        }
        kids.map(|k| self.counts[k].pods)
            .filter(|&p| p > 0)
            .map(|p| {
                let q = p as f64 / total as f64;
                -q * q.log2()
            })
            .sum()
    }
}
