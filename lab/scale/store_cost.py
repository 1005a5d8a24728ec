"""What one store request costs: the round trip of a ``get`` to the job's store (the C++
TcpStoreServer, over loopback TCP) and the CPU both ends spend on it. Init today makes
~1.5 N^2 such requests in all (model.store_requests_today), so this is the store path's
per-message cost in the model.

    python -m lab.scale.store_cost [--requests 5000]
"""

import argparse
import json
import resource
import secrets
import statistics
import time


def measure(requests=5000, rounds=3):
    """``{"round_trip_s": median, "cpu_s_per_request": median, "rounds": [...]}``: one client,
    requests one after another (client and server in this process, so the CPU time is
    both ends' together)."""
    from tfring import _core

    secret = secrets.token_hex(32)
    server = _core.StoreServer("127.0.0.1", 0, secret)
    try:
        client = _core.StoreClient("127.0.0.1", server.port, secret, 10.0)
        client.set("addr/0", b"127.0.0.1:12345")
        rows = []
        for _ in range(rounds):
            ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for _ in range(requests):
                client.get("addr/0", 10.0)
            elapsed, ru1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
            cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
            rows.append({"round_trip_s": elapsed / requests, "cpu_s_per_request": cpu / requests})
        del client
    finally:
        server.stop()
    return {"round_trip_s": statistics.median(r["round_trip_s"] for r in rows),
            "cpu_s_per_request": statistics.median(r["cpu_s_per_request"] for r in rows), "rounds": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    args = parser.parse_args()
    print(json.dumps(measure(args.requests), indent=1))


if __name__ == "__main__":
    main()
