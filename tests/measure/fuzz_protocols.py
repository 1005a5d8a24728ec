"""Long fuzz run of the coordinator wire format and the store protocol (the seeded short
run is tests/test_fuzz.py). Random and mutated inputs for --minutes; prints counts.

    python tests/measure/fuzz_protocols.py --minutes 3 [--json lab/results/fuzz.json]
"""

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests import fuzz_targets
from tfring import _core


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--json")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    seed_msg = _core._encode_requests(["a", "grad/b", "c" * 100])
    store = fuzz_targets.StoreFuzzer()
    counts = {"decode_random": 0, "decode_mutated": 0, "decode_accepted": 0, "store_frames": 0, "store_unauth": 0}
    deadline = time.time() + args.minutes * 60
    while time.time() < deadline:
        for _ in range(2000):
            data = rng.randbytes(rng.randint(0, 300))
            counts["decode_accepted"] += fuzz_targets.decode_control(data)
            flips = [(rng.randint(0, 10_000), rng.randint(0, 255)) for _ in range(rng.randint(1, 6))]
            mutated = fuzz_targets.mutate(seed_msg, flips)[: rng.randint(0, len(seed_msg))]
            counts["decode_accepted"] += fuzz_targets.decode_control(mutated)
            counts["decode_random"] += 1
            counts["decode_mutated"] += 1
        for _ in range(20):
            payload = bytes([rng.randint(0, 5)]) + rng.randbytes(rng.randint(0, 40))
            store.send_frame(payload)
            counts["store_frames"] += 1
        store.send_unauthenticated(rng.randbytes(rng.randint(48, 60)))
        counts["store_unauth"] += 1
    store.close()
    result = {"seed": args.seed, "minutes": args.minutes, "counts": counts, "crashes": 0, "hangs": 0}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
