#!/usr/bin/env python3
"""A relist under load (BENCHMARKS.md, "A relist while requests come"): asks the
`fake-apiserver` example to forget its history (`POST /fake/compact`, as an etcd compaction
does), so every watch of kube-tas ends with 410 Gone and lists its kind again, then prints how
long kube-tas took until it had applied the new list of `--kind` (its
`kube_tas_watch_relists_total{kind}` on the admin port goes up). The time includes
kube-runtime's backoff after the 410 (0.8-1.6 s).

    python3 benches/relist.py --api http://127.0.0.1:16443 --admin http://127.0.0.1:18080

Run a load generator against kube-tas meanwhile to measure the relist under requests.
"""
import argparse
import time
import urllib.request


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", default="http://127.0.0.1:16443", help="the fake API server")
    p.add_argument("--admin", default="http://127.0.0.1:18080", help="kube-tas's admin port")
    p.add_argument("--kind", default="pods", help="the watched kind to wait for (its plural)")
    p.add_argument("--timeout", type=float, default=120, help="seconds to wait at most")
    a = p.parse_args()

    def metric(name):
        series = f'{name}{{kind="{a.kind}"}}'
        text = urllib.request.urlopen(f"{a.admin}/metrics").read().decode()
        for line in text.splitlines():
            if line.startswith(series):
                return int(float(line.split()[1]))
        raise SystemExit(f"{a.admin}/metrics has no {series}")

    def relists():
        return metric("kube_tas_watch_relists_total")

    # A first list still going on would be timed instead of the relist.
    if metric("kube_tas_watch_synced") != 1:
        raise SystemExit(f"kube-tas has not listed {a.kind} yet: wait for /readyz")
    before = relists()
    started = time.time()
    urllib.request.urlopen(urllib.request.Request(f"{a.api}/fake/compact", method="POST")).read()
    while relists() == before:
        if time.time() - started > a.timeout:
            raise SystemExit(f"no relist of {a.kind} within {a.timeout:.0f} s")
        time.sleep(0.02)
    print(f"relist: {a.kind} listed again and applied in {time.time() - started:.2f} s", flush=True)


if __name__ == "__main__":
    main()
