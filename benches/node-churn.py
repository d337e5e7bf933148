#!/usr/bin/env python3
"""Node churn for measuring kube-tas while nodes change (BENCHMARKS.md, "`filter` while nodes
change"): cordons and uncordons nodes of the `fake-apiserver` example by merge patch at a
steady rate for a while, then prints how many changes it made and how many topology trees
kube-tas built meanwhile (`kube_tas_topology_tree_builds_total` on its admin port).

    python3 benches/node-churn.py --api http://127.0.0.1:16443 \
        --admin http://127.0.0.1:18080 --gap-ms 20 --seconds 13

The fake API server serves plain HTTP without authentication; against a real cluster use
kubectl instead.
"""
import argparse
import json
import time
import urllib.request


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", default="http://127.0.0.1:16443", help="the fake API server")
    p.add_argument("--admin", default="http://127.0.0.1:18080", help="kube-tas's admin port")
    p.add_argument("--nodes", type=int, default=500, help="how many nodes take turns")
    p.add_argument("--gap-ms", type=float, default=20, help="pause after each change")
    p.add_argument("--seconds", type=float, default=13, help="how long to go on")
    a = p.parse_args()

    listed = json.load(urllib.request.urlopen(f"{a.api}/api/v1/nodes?limit={a.nodes}"))
    names = [n["metadata"]["name"] for n in listed["items"]]
    if not names:
        raise SystemExit(f"{a.api} lists no nodes")

    def patch(name, cordon):
        req = urllib.request.Request(
            f"{a.api}/api/v1/nodes/{name}",
            method="PATCH",
            data=json.dumps({"spec": {"unschedulable": cordon}}).encode(),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        urllib.request.urlopen(req).read()

    def builds():
        text = urllib.request.urlopen(f"{a.admin}/metrics").read().decode()
        for line in text.splitlines():
            if line.startswith("kube_tas_topology_tree_builds_total"):
                return int(float(line.split()[1]))
        raise SystemExit(f"{a.admin}/metrics has no kube_tas_topology_tree_builds_total")

    before, started, changes = builds(), time.time(), 0
    while time.time() - started < a.seconds:
        # Every name cordoned in turn, then every one uncordoned: each patch is a change.
        patch(names[changes % len(names)], (changes // len(names)) % 2 == 0)
        changes += 1
        time.sleep(a.gap_ms / 1000)
    took = time.time() - started
    print(
        f"churn: {changes} changes in {took:.1f} s ({changes / took:.0f}/s): "
        f"{builds() - before} tree builds",
        flush=True,
    )


if __name__ == "__main__":
    main()
