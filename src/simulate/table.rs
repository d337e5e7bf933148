//! The people-facing output of `simulate`: each flavor's topology as a tree (block → rack →
//! host) with free capacity and the pods each workload got there, then every workload's
//! outcome. Big clusters are shown only where pods were placed, with a count of the rest.

use std::fmt::Write as _;

use crate::simulate::{FlavorReport, Report};
use crate::topology::tree::DomainIdx;

/// Above this many leaves, only domains holding placed pods are drawn.
const FULL_TREE_LEAVES: usize = 200;

/// Renders the report as text.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.flavors {
        render_flavor(&mut out, f);
        out.push('\n');
    }
    for line in &report.left_out {
        let _ = writeln!(out, "Left out: {line}");
    }
    if !report.left_out.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, "Workloads:");
    for w in &report.workloads {
        let id = format!("{} {}/{}", w.kind, w.namespace, w.name);
        if !w.admitted {
            let _ = writeln!(
                out,
                "  DENIED   {id}\n           {}",
                w.message.as_deref().unwrap_or("")
            );
            continue;
        }
        for ps in &w.pod_sets {
            let name = if w.pod_sets.len() > 1 {
                format!("{id} [{}]", ps.name)
            } else {
                id.clone()
            };
            if ps.flavor.is_none() && ps.fits && !ps.levels.is_empty() {
                // A Workload-API group: its domain by the keys above the hostname.
                let placed: i64 = ps.domains.iter().map(|d| d.count).sum();
                let keys = &ps.levels[..ps.levels.len() - 1];
                let mut domains: Vec<String> = ps
                    .domains
                    .iter()
                    .map(|d| {
                        keys.iter()
                            .zip(&d.values)
                            .map(|(k, v)| format!("{} {v}", crate::plans::level_noun(k)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .collect();
                domains.dedup();
                let nodes: std::collections::BTreeSet<&String> =
                    ps.domains.iter().filter_map(|d| d.values.last()).collect();
                let within = match domains.as_slice() {
                    [one] if !one.is_empty() => format!(" in {one}"),
                    [_] | [] => String::new(),
                    many => format!(" in {}", many.join("; ")),
                };
                let _ = writeln!(
                    out,
                    "  PLACED   {name}: {placed}/{} pod(s){within} on {} node(s)",
                    ps.count,
                    nodes.len()
                );
            } else if ps.flavor.is_none() && ps.levels.is_empty() && ps.fits {
                let _ = writeln!(
                    out,
                    "  SKIPPED  {name}: no topology request; kube-scheduler places it alone"
                );
            } else if ps.fits {
                let placed: i64 = ps.domains.iter().map(|d| d.count).sum();
                let _ = writeln!(
                    out,
                    "  PLACED   {name}: {placed}/{} pod(s) on {} {} domain(s) of flavor {}",
                    ps.count,
                    ps.domains.len(),
                    ps.levels.last().map(String::as_str).unwrap_or("?"),
                    ps.flavor.as_deref().unwrap_or("?")
                );
                if !ps.replaced.is_empty() {
                    let replaced: i64 = ps.replaced.iter().map(|d| d.count).sum();
                    let at: Vec<String> = ps
                        .replaced
                        .iter()
                        .map(|d| format!("{} x{}", d.values.join("/"), d.count))
                        .collect();
                    let _ = writeln!(
                        out,
                        "           {replaced} replaced for pods lost on a failed node: {}",
                        at.join(", ")
                    );
                }
            } else {
                let _ = writeln!(
                    out,
                    "  NO FIT   {name}: {} pod(s)\n           {}",
                    ps.count,
                    ps.message.as_deref().unwrap_or("")
                );
            }
        }
        for warning in &w.warnings {
            let _ = writeln!(out, "           warning: {warning}");
        }
    }
    out
}

fn render_flavor(out: &mut String, f: &FlavorReport) {
    let tree = &f.tree;
    let _ = writeln!(
        out,
        "Flavor {} (Topology {}: {})",
        f.name,
        tree.topology_name,
        tree.levels.join(" → ")
    );
    let full = tree.leaves().len() <= FULL_TREE_LEAVES;
    let shown = |d: DomainIdx| full || subtree_has_pods(f, d);
    let roots: Vec<DomainIdx> = tree.by_level.first().cloned().unwrap_or_default();
    let visible: Vec<DomainIdx> = roots.iter().copied().filter(|&d| shown(d)).collect();
    for (i, &d) in visible.iter().enumerate() {
        render_domain(out, f, d, "", i + 1 == visible.len(), &shown);
    }
    let hidden = tree.leaves().iter().filter(|&&l| !shown(l)).count();
    if hidden > 0 {
        let _ = writeln!(
            out,
            "  ({hidden} more {} domain(s) without placed pods not shown)",
            tree.levels.last().map(String::as_str).unwrap_or("")
        );
    }
}

fn render_domain(
    out: &mut String,
    f: &FlavorReport,
    d: DomainIdx,
    prefix: &str,
    last: bool,
    shown: &dyn Fn(DomainIdx) -> bool,
) {
    let tree = &f.tree;
    let dom = &tree.domains[d];
    let branch = if last { "└─ " } else { "├─ " };
    let name = tree.value(d);
    if dom.children.is_empty() {
        let placed = f
            .placed
            .get(&d)
            .map(|v| {
                v.iter()
                    .map(|(w, c)| format!("{w}×{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{prefix}{branch}{name:<20} free {:<40} {placed}",
            free_text(f, d)
        );
    } else {
        let _ = writeln!(out, "{prefix}{branch}{name}");
        let kids: Vec<DomainIdx> = dom.children.clone().filter(|&c| shown(c)).collect();
        let next = format!("{prefix}{}", if last { "   " } else { "│  " });
        for (i, &c) in kids.iter().enumerate() {
            render_domain(out, f, c, &next, i + 1 == kids.len(), shown);
        }
    }
}

fn subtree_has_pods(f: &FlavorReport, d: DomainIdx) -> bool {
    let tree = &f.tree;
    let dom = &tree.domains[d];
    if dom.children.is_empty() {
        return f.placed.contains_key(&d);
    }
    dom.children.clone().any(|c| subtree_has_pods(f, c))
}

fn free_text(f: &FlavorReport, leaf: DomainIdx) -> String {
    let tree = &f.tree;
    let free = f.free.remaining(leaf);
    let cap = tree.capacity(leaf);
    tree.resources
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{r} {}/{}", amount(r, free[i]), amount(r, cap[i])))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A resource amount as a person reads it: cores for CPU, Gi for memory, else the number.
fn amount(resource: &str, v: i64) -> String {
    match resource {
        "cpu" if v % 1000 == 0 => format!("{}", v / 1000),
        "cpu" => format!("{}m", v),
        "memory" | "ephemeral-storage" if v % (1 << 30) == 0 => format!("{}Gi", v >> 30),
        "memory" | "ephemeral-storage" if v % (1 << 20) == 0 => format!("{}Mi", v >> 20),
        _ => v.to_string(),
    }
}
