"""A cost model of what grows with a tfring job, fitted to the scale lab's measurements.

Two kinds of terms:
  * exact counts read from today's code (descriptors, store requests, heartbeat frames):
    tests/test_scale_lab.py checks them against a real 4-rank job, so they cannot drift
    from the code silently;
  * per-message / per-byte / per-hop costs fitted (least squares, coefficients kept
    non-negative) to the lab's timings on this machine, which are upper bounds (N
    processes share 2 cores).

``Model.today(n)`` predicts today's design; ``Model.redesign(n)`` the designs issue 30 asks
for (tree / bit-vector negotiation, a ring of heartbeat watchers, topology-driven lazy
connections, recursive doubling for small tensors, address exchange without O(N^2) store
reads). Everything at sizes the lab did not run is a PREDICTION, and so is every figure of
the redesign. The assumptions are the ``Assumptions`` fields, each with its reason;
docs/scaling.md prints them.
"""

import dataclasses
import math

import numpy as np

# ---------------------------------------------------------------- exact counts (today's code)

HEARTBEAT_FRAME_BYTES = 5  # Socket::SendMessage: 4-byte length + 1-byte kind (cc/core/liveness.cc)
TCP_FRAME_OVERHEAD_BYTES = 66  # Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12, per segment on a wire


def heartbeat_interval_s(peer_timeout_s=30.0):
    """PeerLiveness::IntervalFor: a tenth of the timeout, between 50 ms and 1 s."""
    if peer_timeout_s <= 0:
        return 1.0
    return min(1.0, max(0.05, peer_timeout_s / 10))


# The control plane the code runs today. The lab's result files record the one they ran on
# ("control_plane"; absent = "star", the runs recorded before the heartbeat ring and the
# roster exchange; "ring": heartbeat ring, negotiation still a star; "tree": negotiation
# over the control tree of cc/core/control_tree.h as well): the fits read each file with
# its own design's counts.
CONTROL_PLANE = "tree"
CONTROL_FANOUT = 4  # TFRING_CONTROL_FANOUT's default


def control_children(n, rank=0, design=CONTROL_PLANE, fanout=CONTROL_FANOUT):
    """Control connections a rank accepts: rank 0's n-1 in the star designs; in the tree
    (ControlTree: children of r are r*F+1 .. r*F+F) its children below n."""
    if n <= 1:
        return 0
    if design != "tree" or fanout <= 0 or fanout >= n - 1:
        return n - 1 if rank == 0 else 0
    first = rank * fanout + 1
    return max(0, min(first + fanout, n) - first)


def heartbeat_peers(n, design=CONTROL_PLANE):
    """The ranks rank 0 exchanges heartbeats with: its two ring neighbours
    (Communicator::HeartbeatPeers; one at 2 ranks), or every other rank in the star."""
    if n <= 1:
        return 0
    if design == "star":
        return n - 1
    return 1 if n == 2 else 2


def rank0_sockets_today(n, design=CONTROL_PLANE, fanout=CONTROL_FANOUT):
    """Rank 0's sockets after init: the data mesh (n-1), its control children (n-1 in the
    star), its heartbeat peers and its store connection (cc/core/communicator.cc)."""
    if n <= 1:
        return 0
    return (n - 1) + control_children(n, 0, design, fanout) + heartbeat_peers(n, design) + 1


def worker_sockets_today(n, design=CONTROL_PLANE, rank=None, fanout=CONTROL_FANOUT):
    """Any other rank's: data mesh (n-1), control to its parent (rank 0 in the star) and
    from its children (``rank``: None = a leaf), its heartbeat peers (rank 0 alone in the
    star), the store."""
    if n <= 1:
        return 0
    children = control_children(n, rank, design, fanout) if rank else 0
    return (n - 1) + 1 + children + (1 if design == "star" else heartbeat_peers(n)) + 1


# A rank started by tfringrun holds 3 standard streams (stdin /dev/null, stdout and stderr
# pipes) and the runtime 2 eventfds (its background thread's and the liveness thread's
# wake-ups); shared-memory rings are mapped and their descriptors closed.
OTHER_FDS = 3 + 2


def rank0_fds_today(n, fanout=CONTROL_FANOUT):
    return rank0_sockets_today(n, fanout=fanout) + OTHER_FDS


def worker_fds_today(n, rank=None, fanout=CONTROL_FANOUT):
    return worker_sockets_today(n, rank=rank, fanout=fanout) + OTHER_FDS


def rank0_control_messages_today(n, cycles_per_step, design=CONTROL_PLANE, fanout=CONTROL_FANOUT):
    """Rank 0 answers each control child (every other rank in the star) once per
    negotiation cycle that schedules work, and each such cycle runs one (fused) collective:
    messages = children x collectives per step (exact in every lab run)."""
    return control_children(n, 0, design, fanout) * cycles_per_step


def store_requests_today(n, local_size=1, shm=False, design=CONTROL_PLANE):
    """Store requests of one init, all ranks together (cc/core/job.cc, roster.cc,
    communicator.cc): per rank one ADD (generation), then the roster exchange: every rank
    but 0 SETs its entry, rank 0 GETs the n-1 entries and SETs the roster, every other rank
    GETs it (3n - 2, counted by cc/tests/roster_test.cc). The star design read every record
    on every rank: per rank r one ADD, one SET addr, r GETs of lower ranks' addresses, one
    SET and n-1 GETs of host records; rank 0 SET its hostname, every other rank GOT it.
    With shared memory, per local peer: SET ring name, GET the peer's, SET "opened", plus
    one WAIT; rank 0 and its local peers once more for the control rings."""
    n = int(n)
    if n <= 1:
        return 0
    if design == "star":
        total = sum(3 + r + (n - 1) for r in range(n)) + 1 + (n - 1)
    else:
        total = n + 3 * n - 2
    if shm and local_size > 1:
        hosts = n // local_size
        total += hosts * local_size * (3 * (local_size - 1) + 1) + 2 * 3 * (local_size - 1)
    return total


def heartbeat_rank0_frames_per_s_today(n, peer_timeout_s=30.0, design=CONTROL_PLANE):
    """Frames rank 0 sends per second: a ping to each heartbeat peer and a pong to each
    peer's ping (it receives as many)."""
    return 2 * heartbeat_peers(n, design) / heartbeat_interval_s(peer_timeout_s)


def ring_steps(n):
    """Sequential steps of a ring allreduce (reduce-scatter + allgather)."""
    return 2 * (n - 1)


def recursive_doubling_steps(n):
    """Recursive doubling; a non-power-of-two size adds a fold-in and a fold-out step."""
    if n <= 1:
        return 0
    steps = math.floor(math.log2(n))
    return steps + (0 if n & (n - 1) == 0 else 2)


def small_allreduce_s(algorithm, n, hop_s, ranks_per_host=1, local_step_s=0.0):
    """Sequential-step time of an 8-byte allreduce's data movement over ``n`` ranks placed
    host by host (``ranks_per_host`` each, a power of two), a step between hosts costing
    ``hop_s`` and one inside a host ``local_step_s`` (negotiation not included). Algorithms
    as the CPU backend runs them: ``ring`` (2(n-1) steps, each waiting for the ring's
    edges that cross hosts: ``hop_s`` each),
    ``recursive_doubling`` (the log2 L steps of distance < L stay inside a host),
    ``hierarchical_doubling`` (binomial reduce and broadcast inside hosts, recursive doubling
    among the H leaders)."""
    hosts = max(n // ranks_per_host, 1)
    local = int(math.log2(ranks_per_host)) if ranks_per_host > 1 else 0
    if algorithm == "ring":
        return ring_steps(n) * hop_s
    if algorithm == "recursive_doubling":
        steps = recursive_doubling_steps(n)
        return local * local_step_s + (steps - local) * hop_s
    if algorithm == "hierarchical_doubling":
        return 2 * local * local_step_s + recursive_doubling_steps(hosts) * hop_s
    raise ValueError(f"unknown algorithm {algorithm!r}")


def link_limit_s(hosts, nbytes, link_bytes_per_s):
    """The least time any allreduce of ``nbytes`` needs across ``hosts`` hosts, each with
    one link of ``link_bytes_per_s`` each way: every host must send 2(H-1)/H of the tensor."""
    return 2 * (hosts - 1) / hosts * nbytes / link_bytes_per_s


def link_bound_fraction(hosts, n):
    """The share of that limit a flat ring over ``n`` ranks placed host by host can reach:
    each host's one ring edge out carries 2(n-1)/n of the tensor."""
    if hosts < 2:
        return 1.0
    return (2 * (hosts - 1) / hosts) / (2 * (n - 1) / n)


def tree_depth(n, fanout=2):
    return math.ceil(math.log(n, fanout)) if n > 1 else 0


# ---------------------------------------------------------------- fitting


def fit(xs, ys, basis):
    """Least squares ``y ~ sum(c_i * f_i(x))`` with every coefficient >= 0 (a negative cost
    is noise: that term is dropped and the rest refitted). Returns the coefficients."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    active = list(range(len(basis)))
    while True:
        a = np.column_stack([np.asarray([basis[i](x) for x in xs], float) for i in active])
        coef, *_ = np.linalg.lstsq(a, ys, rcond=None)
        if (coef >= 0).all() or len(active) == 1:
            out = [0.0] * len(basis)
            for i, c in zip(active, coef):
                out[i] = max(0.0, float(c))
            return out
        active.pop(int(np.argmin(coef)))


def _tcp_runs(local, shm="off"):
    """(n, row) for every repeat of every size with the given shm setting."""
    return [(res["np"], row) for res in local["results"] if res["shm"] == shm for row in res["runs"]]


def ONE(n):  # basis functions of the fits
    return 1.0


def PEERS(n):
    return n - 1.0


@dataclasses.dataclass
class Assumptions:
    """What the predictions assume (docs/scaling.md prints each with its reason)."""

    hop_s: float = 30e-6  # one network hop between hosts (issue 31's figure; a switch + kernel each side)
    store_cores: int = 8  # cores of the store's host serving requests (one thread per client today)
    handshake_round_trips: int = 3  # a connection: TCP connect, HMAC challenge/response, hello
    peer_timeout_s: float = 30.0  # TFRING_PEER_TIMEOUT_S default
    ulimit_fds: int = 1024  # the default soft `ulimit -n`
    tree_fanout: int = 2  # the redesign's negotiation / broadcast tree
    tensors_per_step: int = 150  # the probe's cached step


@dataclasses.dataclass
class Model:
    """Fitted costs (seconds, bytes, counts) and the two designs' predictions."""

    base_fds_rank0: int  # descriptors that are not tfring sockets (Python's, eventfds)
    base_fds_worker: int
    rank0_messages: tuple  # per cached step: a + b (n-1)
    rank0_bytes: tuple
    worker_messages: float  # per cached step, mean over the other ranks (about constant)
    worker_bytes: float
    rank0_cpu: tuple  # s per cached step: a + b (n-1)
    message_cpu_s: float  # rank 0's CPU per control message it sends or receives
    latency_tcp: tuple  # 8-byte allreduce on this host: a + b * ring_steps(n)
    latency_shm: tuple
    init_lab: tuple  # init() of the slowest rank here: a + b * store_requests(n) + c (n-1)
    store_request_cpu_s: float  # one store request, server side (store_cost.py: both ends / 2)
    rss_mb: tuple  # rank 0: a + b (n-1)
    shutdown: tuple  # a + b (n-1)
    crash_detect_s: float  # a SIGKILLed rank named by every survivor, at the smallest size measured (one rank per core)
    init_fixed_s: float  # init() at the smallest size measured (2 ranks): what does not grow with n
    crash_lab: tuple  # the same here: a + b (n-1) (survivors queue for 2 cores)
    assumptions: Assumptions = dataclasses.field(default_factory=Assumptions)

    # ------------------------------------------------------------ fitting

    @classmethod
    def fit(cls, local, store_cost=None, assumptions=None):
        """Fits the model to a scale_local.json payload (``local``) and, when given, the
        store_cost.measure() result."""
        tcp = _tcp_runs(local, "off")
        shm = _tcp_runs(local, "on")
        if not tcp:
            raise ValueError("no TCP (shm off) runs to fit")
        ns = [n for n, _ in tcp]

        def col(rows, key):
            return [r[key] for _, r in rows]

        design = local.get("control_plane", "star")
        base0 = round(float(np.median([r["rank0_fds"] - rank0_sockets_today(n, design) for n, r in tcp])))
        base1 = round(float(np.median([r["other_fds_max"] - worker_sockets_today(n, design, rank=1) for n, r in tcp])))
        msgs0 = fit(ns, col(tcp, "rank0_control_messages_per_step"), [ONE, PEERS])
        bytes0 = fit(ns, col(tcp, "rank0_control_bytes_per_step"), [ONE, PEERS])
        worker_msgs = float(np.mean([r["other_control_messages_per_step_mean"] for n, r in tcp if n > 2]
                                    or col(tcp, "other_control_messages_per_step_mean")))
        worker_bytes = float(np.mean([r["other_control_bytes_per_step_mean"] for n, r in tcp if n > 2]
                                     or col(tcp, "other_control_bytes_per_step_mean")))
        # n = 2 spins (2 ranks, 2 cores): its CPU is not message handling; fit from 4 up.
        cpu_rows = [(n, r) for n, r in tcp if n >= 4] or tcp
        cpu0 = fit([n for n, _ in cpu_rows], col(cpu_rows, "rank0_cpu_s_per_step"), [ONE, PEERS])
        handled_per_peer = msgs0[1] + worker_msgs  # rank 0 sends b per peer, receives each peer's
        message_cpu = cpu0[1] / handled_per_peer if handled_per_peer > 0 else 0.0
        lat_tcp = fit(ns, col(tcp, "latency_8b_s"), [ONE, ring_steps])
        lat_shm = fit([n for n, _ in shm], col(shm, "latency_8b_s"), [ONE, ring_steps]) if shm else [0.0, 0.0]
        if design == "star":
            init = fit(ns, col(tcp, "init_call_s"), [ONE, lambda n: store_requests_today(n, design=design), PEERS])
        else:  # the roster's requests grow like n: not separable from the per-peer term
            init_one, init_peers = fit(ns, col(tcp, "init_call_s"), [ONE, PEERS])
            init = [init_one, 0.0, init_peers]
        if store_cost:
            store_cpu = store_cost["cpu_s_per_request"] / 2
        else:  # the lab's own fit: every request's both ends on these cores
            store_cpu = init[1] / 2
        rss = fit(ns, col(tcp, "rank0_rss_mb"), [ONE, PEERS])
        shutdown = fit(ns, col(tcp, "shutdown_s"), [ONE, PEERS])
        # With one rank per core (2 ranks here) a survivor sees the socket close at once;
        # past that, the survivors wait for a core: the growth here is this host's.
        kills = sorted((res["np"], res["kill"]["kill"]["detect_max_s"]) for res in local["results"]
                       if res.get("kill") and res["kill"].get("kill")
                       and res["kill"]["kill"]["detect_max_s"] is not None)
        crash_lab = fit([n for n, _ in kills], [t for _, t in kills], [ONE, PEERS]) if kills else [0.0, 0.0]
        smallest = min(ns)
        init_fixed = float(np.median([r["init_call_s"] for n, r in tcp if n == smallest]))
        return cls(base0, base1, tuple(msgs0), tuple(bytes0), worker_msgs, worker_bytes, tuple(cpu0), message_cpu,
                   tuple(lat_tcp), tuple(lat_shm), tuple(init), store_cpu, tuple(rss), tuple(shutdown),
                   float(np.median([t for n, t in kills if n == kills[0][0]])) if kills else float("nan"),
                   init_fixed, tuple(crash_lab),
                   assumptions or Assumptions())

    # ------------------------------------------------------------ the lab itself (this host)

    def lab(self, n):
        """The fitted curves on this machine (to draw over the measured points)."""
        return {
            "init_call_s": self.init_lab[0] + self.init_lab[1] * store_requests_today(n) + self.init_lab[2] * (n - 1),
            "latency_8b_s": self.latency_tcp[0] + self.latency_tcp[1] * ring_steps(n),
            "latency_8b_shm_s": self.latency_shm[0] + self.latency_shm[1] * ring_steps(n),
            "rank0_cpu_s_per_step": self.rank0_cpu[0] + self.rank0_cpu[1] * (n - 1),
            "crash_detect_s": self.crash_lab[0] + self.crash_lab[1] * (n - 1),
        }

    # ------------------------------------------------------------ today's design

    def today(self, n):
        """Today's design at n ranks (one rank per core, hosts ``hop_s`` apart). A dict of
        figures, each named as in the lab's rows."""
        a = self.assumptions
        rtt = 2 * a.hop_s
        store_s = store_requests_today(n) * self.store_request_cpu_s / a.store_cores
        chain_s = 2 * (n - 1) * rtt + (n - 1) * a.handshake_round_trips * rtt  # the last rank's reads + connects
        accept_s = 3 * (n - 1) * a.handshake_round_trips * rtt  # rank 0's one acceptor thread
        msgs0 = self.rank0_messages[0] + self.rank0_messages[1] * (n - 1)
        # a request up, rank 0 reads n-1 requests and writes n-1 responses, a response down
        negotiation_s = 2 * a.hop_s + 2 * (n - 1) * self.message_cpu_s
        interval = heartbeat_interval_s(a.peer_timeout_s)
        frames = heartbeat_rank0_frames_per_s_today(n, a.peer_timeout_s)
        return {
            "init_s": self.init_fixed_s + max(store_s, chain_s, accept_s),
            "store_requests": store_requests_today(n),
            "rank0_control_messages_per_step": msgs0,
            "rank0_control_bytes_per_step": self.rank0_bytes[0] + self.rank0_bytes[1] * (n - 1),
            "rank0_cpu_s_per_step": self.rank0_cpu[0] + self.rank0_cpu[1] * (n - 1),
            "rank0_fds": rank0_sockets_today(n) + self.base_fds_rank0,
            "worker_fds": worker_sockets_today(n, rank=1) + self.base_fds_worker,
            "latency_8b_s": negotiation_s + ring_steps(n) * a.hop_s,
            "heartbeat_rank0_frames_per_s": 2 * frames,  # sent + received
            "heartbeat_rank0_bytes_per_s": 2 * frames * HEARTBEAT_FRAME_BYTES,
            "heartbeat_rank0_wire_bytes_per_s": 2 * frames * (HEARTBEAT_FRAME_BYTES + TCP_FRAME_OVERHEAD_BYTES),
            "heartbeat_rank0_cpu_share": 2 * frames * self.message_cpu_s,
            "crash_detect_s": self.crash_detect_s,  # every survivor holds a socket to the dead rank
            "freeze_detect_s": a.peer_timeout_s + interval + (n - 2) * self.message_cpu_s + a.hop_s,
            "rss_mb": self.rss_mb[0] + self.rss_mb[1] * (n - 1),
            "shutdown_s": self.shutdown[0] + self.shutdown[1] * (n - 1),
        }

    # ------------------------------------------------------------ the redesign (issue 30)

    def redesign(self, n):
        """The designs issue 30 asks for, same assumptions: once the cache knows a step's
        tensors, readiness bit-vectors are combined by a recursive-doubling allreduce
        (Horovod's bit-vector allreduce: log2 n messages per rank per cycle, rank 0 no
        different from the others); heartbeats in a ring (each rank watches its
        predecessor, verdicts spread down a ``tree_fanout`` tree); connections to ring
        neighbours, recursive-doubling partners and tree neighbours only; addresses
        published once per rank and read only for those partners; recursive doubling for
        small allreduces. PREDICTIONS: none of this exists yet."""
        a = self.assumptions
        rtt = 2 * a.hop_s
        depth = tree_depth(n, a.tree_fanout)
        steps = recursive_doubling_steps(n)
        partners = 2 + math.floor(math.log2(max(n, 2))) + (a.tree_fanout + 1)  # ring, doubling, tree
        cycles = max(1.0, self.rank0_messages[1])  # negotiation cycles per step (messages per peer)
        message_bytes = self.worker_bytes / self.worker_messages if self.worker_messages else 32.0
        bits_bytes = math.ceil(a.tensors_per_step / 8)
        store_requests = n * (3 + partners)
        store_s = store_requests * self.store_request_cpu_s / a.store_cores
        chain_s = partners * (1 + a.handshake_round_trips) * rtt + 2 * depth * a.hop_s
        msgs0 = cycles * steps
        return {
            "init_s": self.init_fixed_s + max(store_s, chain_s),
            "store_requests": store_requests,
            "rank0_control_messages_per_step": msgs0,
            "rank0_control_bytes_per_step": msgs0 * max(message_bytes, bits_bytes + 8),
            "rank0_cpu_s_per_step": self.rank0_cpu[0] + 2 * msgs0 * self.message_cpu_s,
            "rank0_fds": partners + 1 + self.base_fds_rank0,
            "worker_fds": partners + 1 + self.base_fds_worker,
            # the bit-vector allreduce (a send and a receive per step), then the data's
            "latency_8b_s": steps * (a.hop_s + 2 * self.message_cpu_s) + steps * a.hop_s,
            "heartbeat_rank0_frames_per_s": 4 / heartbeat_interval_s(a.peer_timeout_s),
            "heartbeat_rank0_bytes_per_s": 4 / heartbeat_interval_s(a.peer_timeout_s) * HEARTBEAT_FRAME_BYTES,
            "heartbeat_rank0_wire_bytes_per_s": 4 / heartbeat_interval_s(a.peer_timeout_s)
            * (HEARTBEAT_FRAME_BYTES + TCP_FRAME_OVERHEAD_BYTES),
            "heartbeat_rank0_cpu_share": 4 / heartbeat_interval_s(a.peer_timeout_s) * self.message_cpu_s,
            "crash_detect_s": self.crash_detect_s + depth * a.hop_s,  # ranks without a socket to it hear down the tree
            "freeze_detect_s": a.peer_timeout_s + heartbeat_interval_s(a.peer_timeout_s) + depth * a.hop_s,
            "rss_mb": self.rss_mb[0] + self.rss_mb[1] * partners,
            "shutdown_s": self.shutdown[0] + self.shutdown[1] * partners,
        }

    def to_dict(self):
        return dataclasses.asdict(self)


BUDGETS = (
    # (what, figure of Model.today(), budget, why that budget)
    ("rank 0's open descriptors", "rank0_fds", 1024, "the default soft `ulimit -n`: past it init fails"),
    ("8-byte allreduce", "latency_8b_s", 1e-3, "issue 31's target at 1,024 ranks"),
    ("rank 0's CPU per cached step", "rank0_cpu_s_per_step", 10e-3, "a small model's whole step"),
    ("heartbeats at rank 0", "heartbeat_rank0_cpu_share", 0.01, "1% of rank 0's core"),
    ("init", "init_s", 10.0, "issue 30's target at 1,024 ranks"),
)


def crossing(model, key, budget, design="today", largest=1 << 20):
    """The smallest job size at which ``design``'s figure ``key`` exceeds ``budget`` (None
    if not up to ``largest``). The figures grow with n, so a bisection finds it."""
    figure = getattr(model, design)
    if figure(largest)[key] <= budget:
        return None
    lo, hi = 2, largest
    while lo < hi:
        mid = (lo + hi) // 2
        if figure(mid)[key] > budget:
            hi = mid
        else:
            lo = mid + 1
    return lo


def first_limit(model, n=1000):
    """Today's limits in the order a growing job hits them: rows of (what, figure at ``n``,
    budget, why, the size that crosses it, the redesign's figure at ``n``), smallest
    crossing first (never crossed last)."""
    rows = []
    for what, key, budget, why in BUDGETS:
        rows.append((what, model.today(n)[key], budget, why, crossing(model, key, budget),
                     model.redesign(n)[key], crossing(model, key, budget, "redesign")))
    return sorted(rows, key=lambda row: row[4] if row[4] is not None else float("inf"))


def ring_bytes_per_rank(n, nbytes):
    """Bytes each rank sends (and each host's one ring edge carries) in a ring allreduce."""
    return 2 * (n - 1) / n * nbytes


def data_ring_cost(points):
    """Per-collective and per-byte cost of the data ring, ``t = a + b * 2(n-1)/n * S``,
    fitted to ``points`` = [(n, nbytes, seconds)]. Returns (a seconds, b seconds per byte)."""
    if not points:
        return None
    xs = [(n, nbytes) for n, nbytes, _ in points]
    coef = fit(xs, [t for *_, t in points], [lambda x: 1.0, lambda x: ring_bytes_per_rank(x[0], x[1])])
    return coef[0], coef[1]


def big_points(payload, **match):
    """(n, nbytes, seconds) of every run's big allreduces in a scale_*.json payload whose
    result matches ``match`` (e.g. shm="off")."""
    out = []
    for res in (payload or {}).get("results", []):
        if any(res.get(k) != v for k, v in match.items()):
            continue
        for run in res["runs"]:
            for size, seconds in (run.get("big_s") or {}).items():
                out.append((res["np"], int(size), seconds))
    return out
