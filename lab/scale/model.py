"""A cost model of what grows with a tfring job, fitted to the scale lab's measurements.

Two kinds of terms:
  * exact counts read from the code (descriptors, store requests, heartbeat frames, control
    messages per negotiation round): lab/scale/test_scale_lab.py checks them against a real
    4-rank job, so they cannot drift from the code silently;
  * per-message / per-byte / per-hop costs fitted (least squares, coefficients kept
    non-negative) to the lab's timings on this machine, which are upper bounds (N
    processes share 2 cores).

Two designs are predicted side by side, each fitted to the lab runs of its own build:
``Model.old(n)`` is the star and the full mesh the lab first measured (rank 0 negotiates
with every rank and watches every rank's heartbeats, every rank connects to every other,
every rank reads every store record; lab/results/scale_local*.json); ``Model.now(n)``
is the design as built today (negotiation over the control tree, TFRING_CONTROL_FANOUT = 4;
lazy data connections past 8 ranks; heartbeats in a ring; the roster exchange; recursive
doubling for small allreduces; lab/results/scale_control_tree*.json,
scale_tree_lazy*.json, scale_shm_oversub.json). Everything at sizes the lab did not run is a
PREDICTION. The assumptions are the ``Assumptions`` fields, each with its reason;
lab/records/scaling.md prints them.
"""

import dataclasses
import math

import numpy as np

# ---------------------------------------------------------------- exact counts (today's code)

HEARTBEAT_FRAME_BYTES = 5  # Socket::SendMessage: 4-byte length + 1-byte kind (cc/core/transport/liveness.cc)
TCP_FRAME_OVERHEAD_BYTES = 66  # Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12, per segment on a wire


def heartbeat_interval_s(peer_timeout_s=30.0):
    """PeerLiveness::IntervalFor: a tenth of the timeout, between 50 ms and 1 s."""
    if peer_timeout_s <= 0:
        return 1.0
    return min(1.0, max(0.05, peer_timeout_s / 10))


# The control plane the code runs today. The lab's result files record the one they ran on
# ("control_plane"; absent = "star", the runs recorded before the heartbeat ring and the
# roster exchange; "ring": heartbeat ring, negotiation still a star; "tree": negotiation
# over the control tree of cc/core/transport/control_tree.h as well): the fits read each file with
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


FULL_MESH_UP_TO_RANKS = 8  # TFRING_DATA_CONNECTIONS=auto: a full mesh up to 8 ranks, lazy beyond


def lazy_data(n, design=CONTROL_PLANE, lazy=None):
    """Whether data connections are made on first use (the design as built, past 8 ranks;
    ``lazy``: TFRING_DATA_CONNECTIONS forced to lazy (True) or mesh (False)) rather than as
    a full mesh at init (every design before it)."""
    if lazy is not None:
        return lazy
    return design == "tree" and n > FULL_MESH_UP_TO_RANKS


def recursive_doubling_partners(n):
    """The most data peers one rank meets in recursive doubling: log2 p partners in the
    power-of-two core p, plus the extra rank folded in off a power of two."""
    if n <= 1:
        return 0
    steps = math.floor(math.log2(n))
    return steps + (0 if n & (n - 1) == 0 else 1)


def _data_sockets(n, design, data_peers, lazy):
    """Full mesh: n-1 sockets from init on. Lazy: the listener that admits peers' dials,
    plus ``data_peers`` connections made by the collectives that ran (0 right after init)."""
    return 1 + data_peers if lazy_data(n, design, lazy) else n - 1


def rank0_sockets_today(n, design=CONTROL_PLANE, fanout=CONTROL_FANOUT, data_peers=0, lazy=None):
    """Rank 0's sockets: the data connections (see _data_sockets), its control children
    (n-1 in the star), its heartbeat peers and its store connection (cc/core/transport/communicator.cc)."""
    if n <= 1:
        return 0
    return (_data_sockets(n, design, data_peers, lazy) + control_children(n, 0, design, fanout)
            + heartbeat_peers(n, design) + 1)


def worker_sockets_today(n, design=CONTROL_PLANE, rank=None, fanout=CONTROL_FANOUT, data_peers=0, lazy=None):
    """Any other rank's: data connections, control to its parent (rank 0 in the star) and
    from its children (``rank``: None = a leaf), its heartbeat peers (rank 0 alone in the
    star), the store."""
    if n <= 1:
        return 0
    children = control_children(n, rank, design, fanout) if rank else 0
    return (_data_sockets(n, design, data_peers, lazy) + 1 + children
            + (1 if design == "star" else heartbeat_peers(n)) + 1)


def control_tree_depth(n, fanout=CONTROL_FANOUT):
    """ControlTree::depth: the hops from rank 0 to its deepest rank (levels of 1, F, F^2,
    ... ranks); 1 for the star (fanout 0, or >= n-1)."""
    if n <= 1:
        return 0
    if fanout <= 0 or fanout >= n - 1:
        return 1
    depth, covered, level = 0, 1, 1
    while covered < n:
        level *= fanout
        covered += level
        depth += 1
    return depth


# A rank started by tfringrun holds 3 standard streams (stdin /dev/null, stdout and stderr
# pipes) and the runtime 2 eventfds (its background thread's and the liveness thread's
# wake-ups); shared-memory rings are mapped and their descriptors closed.
OTHER_FDS = 3 + 2


def rank0_fds_today(n, fanout=CONTROL_FANOUT, data_peers=0, lazy=None):
    return rank0_sockets_today(n, fanout=fanout, data_peers=data_peers, lazy=lazy) + OTHER_FDS


def worker_fds_today(n, rank=None, fanout=CONTROL_FANOUT, data_peers=0, lazy=None):
    return worker_sockets_today(n, rank=rank, fanout=fanout, data_peers=data_peers, lazy=lazy) + OTHER_FDS


def rank0_control_messages_today(n, cycles_per_step, design=CONTROL_PLANE, fanout=CONTROL_FANOUT):
    """Rank 0 answers each control child (every other rank in the star) once per
    negotiation cycle that schedules work, and each such cycle runs one (fused) collective:
    messages = children x collectives per step (exact in every lab run)."""
    return control_children(n, 0, design, fanout) * cycles_per_step


# How init exchanges what ranks know of each other: "layout" (as built: rank 0 gathers the
# entries and publishes the job's layout; a peer's card is read when first dialled) or
# "roster" (before it: rank 0 published the whole roster, which every rank read).
INIT_EXCHANGE = "layout"


def control_parent(rank, n, fanout=CONTROL_FANOUT):
    """A rank's control-tree parent (ControlTree: children of r are r*F+1 .. r*F+F); rank 0
    in the star (fanout 0 or >= n-1); -1 for rank 0."""
    if rank == 0:
        return -1
    if fanout <= 0 or fanout >= n - 1:
        return 0
    return (rank - 1) // fanout


def control_neighbours(rank, n, fanout=CONTROL_FANOUT):
    """A rank's control-tree parent and children (ControlTree; the star: rank 0 and everyone)."""
    parent = control_parent(rank, n, fanout)
    if fanout <= 0 or fanout >= n - 1:
        children = range(1, n) if rank == 0 else []
    else:
        children = range(rank * fanout + 1, min(rank * fanout + fanout + 1, n))
    return ({parent} if parent >= 0 else set()) | set(children)


def shm_ring_peers_at_init(rank, n, local_size, fanout=CONTROL_FANOUT, lazy=None):
    """The ranks of its host (hosts of ``local_size`` consecutive ranks) a rank makes rings
    with at init (shm_setup.cc): every one with the full mesh; with lazy data connections
    only its control-tree neighbours there (the control rings), a pair's data rings coming
    with its first transfer (shm_pairing.h)."""
    first = rank // local_size * local_size
    host = set(range(first, min(first + local_size, n))) - {rank}
    return host if not lazy_data(n, lazy=lazy) else host & control_neighbours(rank, n, fanout)


def cards_at_init(n, fanout=CONTROL_FANOUT, lazy=None, local_size=1, shm=False):
    """Peers' cards read from the store at init, all ranks together (PeerDirectory: one per
    peer): with lazy data connections a rank dials its control-tree parent and lower ring
    neighbour (rank n-1 also rank 0, its upper one), with the full mesh every lower rank;
    with shared memory it also reads the cards of the ranks of its host it makes rings with
    at init (shm_ring_peers_at_init). cc/tests/roster_test.cc counts them. Without shared
    memory counted with arrays over the ranks (the model's searches call it at up to millions
    of ranks); with it, rank by rank."""
    n = int(n)
    if n <= 1:
        return 0
    mesh = not lazy_data(n, lazy=lazy)
    if shm and local_size > 1:
        total = 0
        for r in range(n):
            if mesh:
                peers = set(range(r))
            else:
                peers = {control_parent(r, n, fanout), r - 1} | ({0} if r == n - 1 else set())
            peers |= shm_ring_peers_at_init(r, n, local_size, fanout, lazy)
            total += len(peers - {-1})
        return total
    if mesh:  # every lower rank
        return n * (n - 1) // 2
    r = np.arange(n, dtype=np.int64)
    if fanout <= 0 or fanout >= n - 1:
        parent = np.where(r == 0, -1, 0)
    else:
        parent = np.where(r == 0, -1, (r - 1) // max(fanout, 1))
    below = r - 1  # -1 for rank 0: none
    wrap = np.where(r == n - 1, 0, -1)  # the last rank's upper ring neighbour, rank 0
    count = (parent >= 0).astype(np.int64)
    count += (below >= 0) & (below != parent)
    count += (wrap >= 0) & (wrap != parent) & (wrap != below)
    return int(np.sum(count))


def store_requests_today(n, local_size=1, shm=False, design=CONTROL_PLANE, init=INIT_EXCHANGE):
    """Store requests of one init, all ranks together (cc/core/runtime/job.cc, roster.cc,
    communicator.cc): per rank one ADD (generation), then the roster exchange. As built
    (``init="layout"``): every rank SETs its card and (but rank 0) its entry, rank 0 GETs the
    n-1 entries and SETs the layout, every other rank GETs it, and each rank GETs the cards
    of the peers it dials (cards_at_init): 4n - 2 + cards, counted by cc/tests/roster_test.cc.
    Before (``init="roster"``): every rank but 0 SET its entry, rank 0 GOT the n-1 entries and
    SET the roster, every other rank GOT it (3n - 2). The star design read every record
    on every rank: per rank r one ADD, one SET addr, r GETs of lower ranks' addresses, one
    SET and n-1 GETs of host records; rank 0 SET its hostname, every other rank GOT it.
    With shared memory, every rank with ring peers at init (shm_ring_peers_at_init): SET
    "created", WAIT for theirs, SET "opened", WAIT (4, whatever their number;
    roster_test.cc counts them)."""
    n = int(n)
    if n <= 1:
        return 0
    if design == "star":
        total = 3 * n + n * (n - 1) // 2 + n * (n - 1) + 1 + (n - 1)  # sum over r of 3 + r + (n - 1)
    elif init == "roster":
        total = n + 3 * n - 2
    else:
        total = n + 4 * n - 2 + cards_at_init(n, local_size=local_size, shm=shm)
    if shm and local_size > 1:
        total += 4 * sum(1 for r in range(n) if shm_ring_peers_at_init(r, n, local_size))
    return total


def layout_bytes(n, ranks_per_host, host_bytes):
    """The job's layout as rank 0 publishes it (JobLayout::Encode): a header and, per host,
    its id, hostname, CPU counts and two runs (hosts of consecutive ranks)."""
    return 24 + math.ceil(n / max(ranks_per_host, 1)) * host_bytes


def init_store_read_bytes(n, a):
    """Bytes the store sends the ranks at init, all together (``a``: Assumptions): rank 0
    reads n-1 entries, every other rank the layout, and the cards of the peers dialled.
    Linear in n while the layout stays small (one host: ~130 B); with many hosts the layout
    grows like n / ranks_per_host, so the total like n^2 / ranks_per_host x host_bytes
    (10,000 ranks, 8 per host: ~1.6 GB, against 80 GB for the whole roster to every rank)."""
    if n <= 1:
        return 0
    return ((n - 1) * a.record_bytes + (n - 1) * layout_bytes(n, a.ranks_per_host, a.layout_host_bytes)
            + cards_at_init(n) * a.card_bytes)


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


def LOG2(n):
    return math.log2(n)


@dataclasses.dataclass
class Assumptions:
    """What the predictions assume (lab/records/scaling.md prints each with its reason)."""

    hop_s: float = 30e-6  # one network hop between hosts (issue 31's figure; a switch + kernel each side)
    store_cores: int = 8  # cores of the store's host serving requests (one thread per client today)
    handshake_round_trips: int = 3  # a connection: TCP connect, HMAC challenge/response, hello
    peer_timeout_s: float = 30.0  # TFRING_PEER_TIMEOUT_S default
    ulimit_fds: int = 1024  # the default soft `ulimit -n`
    link_bytes_per_s: float = 10e9 / 8  # the store host's network link (issue 30: init over 10 Gbit/s)
    record_bytes: int = 800  # one rank's roster entry (the old design: its host record + address)
    ranks_per_host: int = 8  # the job's layout grows with its hosts: one host per 8 ranks
    layout_host_bytes: int = 130  # one host in the layout: its id (hostname/boot id/cross rank), hostname, 2 runs
    card_bytes: int = 60  # one rank's card (address, ring token) as the store sends it
    message_cpu_s: float = None  # CPU at one end of a control message; None: the lab's fitted upper bound
    tensors_per_step: int = 150  # the probe's cached step


@dataclasses.dataclass
class TreeCosts:
    """The design as built (control tree + lazy connections), fitted to the lab runs of
    that build (TCP, one host)."""

    rounds: tuple  # negotiation rounds (collectives) per cached step: a + b log2 n
    bytes_per_message: float  # rank 0's control bytes per message it sends (responses)
    rank0_messages_at_4: float  # rank 0's messages per cached step at 4 ranks (issue 30's bound)
    busiest_other_messages: float  # the busiest other rank's messages per step (about constant, n >= 8)
    other_messages_mean: float
    rank0_cpu: tuple  # s per cached step: a + b log2 n
    init_lab: tuple  # init() of the slowest rank here: a + b (n-1)
    latency_tcp_lab: tuple  # 8-byte allreduce here: a + b (n-1)
    latency_shm_lab: tuple
    crash_lab: tuple  # a SIGKILLed rank named by every survivor, here: a + b (n-1)

    @classmethod
    def fit(cls, payloads, senders=()):
        """``payloads``: scale_*.json results of the tree + lazy build; ``senders``: those whose
        other ranks send as the build does now (paced: ParentPacer), for the other ranks'
        messages (default: ``payloads``)."""
        tcp = [(n, r) for p in payloads for n, r in _tcp_runs(p, "off")]
        paced = [(n, r) for p in senders for n, r in _tcp_runs(p, "off")] or tcp
        shm = [(n, r) for p in payloads for n, r in _tcp_runs(p, "on")]
        if not tcp:
            raise ValueError("no TCP (shm off) runs of the control tree to fit")
        ns = [n for n, _ in tcp]

        def col(rows, key):
            return [r[key] for _, r in rows]

        rounds = fit(ns, col(tcp, "collectives_per_step"), [ONE, LOG2])
        per_msg = [r["rank0_control_bytes_per_step"] / r["rank0_control_messages_per_step"]
                   for _, r in tcp if r["rank0_control_messages_per_step"]]
        at4 = [r["rank0_control_messages_per_step"] for n, r in tcp if n == 4]
        wide = [(n, r) for n, r in paced if n > FULL_MESH_UP_TO_RANKS] or paced
        kills = [(p_res["np"], p_res["kill"]["kill"]["detect_max_s"]) for p in payloads for p_res in p["results"]
                 if p_res.get("kill") and p_res["kill"].get("kill") and p_res["kill"]["kill"]["detect_max_s"]]
        return cls(
            rounds=tuple(rounds), bytes_per_message=float(np.median(per_msg)),
            rank0_messages_at_4=float(np.median(at4)) if at4 else float("nan"),
            busiest_other_messages=float(np.median(col(wide, "other_control_messages_per_step_max"))),
            other_messages_mean=float(np.median(col(wide, "other_control_messages_per_step_mean"))),
            rank0_cpu=tuple(fit(ns, col(tcp, "rank0_cpu_s_per_step"), [ONE, LOG2])),
            init_lab=tuple(fit(ns, col(tcp, "init_call_s"), [ONE, PEERS])),
            latency_tcp_lab=tuple(fit(ns, col(tcp, "latency_8b_s"), [ONE, PEERS])),
            latency_shm_lab=tuple(fit([n for n, _ in shm], col(shm, "latency_8b_s"), [ONE, PEERS])) if shm
            else (0.0, 0.0),
            crash_lab=tuple(fit([n for n, _ in kills], [t for _, t in kills], [ONE, PEERS])) if kills else (0.0, 0.0))

    def rounds_at(self, n):
        return self.rounds[0] + self.rounds[1] * math.log2(max(n, 2))


@dataclasses.dataclass
class Model:
    """Fitted costs (seconds, bytes, counts) and the two designs' predictions."""

    base_fds_rank0: int  # descriptors that are not tfring sockets (Python's, eventfds)
    base_fds_worker: int
    rank0_messages: tuple  # the star, per cached step: a + b (n-1)
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
    tree: TreeCosts = None  # the design as built; None: not fitted (Model.now needs it)
    assumptions: Assumptions = dataclasses.field(default_factory=Assumptions)

    # ------------------------------------------------------------ fitting

    @classmethod
    def fit(cls, local, store_cost=None, assumptions=None, tree_runs=(), paced_runs=()):
        """Fits the old design to a scale_local.json payload (``local``: the star and the full
        mesh) and, when given, the store_cost.measure() result; the design as built to
        ``tree_runs`` (payloads of its lab runs; ``paced_runs`` among them for the other
        ranks' messages, see TreeCosts.fit)."""
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
                   init_fixed, tuple(crash_lab), TreeCosts.fit(tree_runs, paced_runs) if tree_runs else None,
                   assumptions or Assumptions())

    @property
    def message_s(self):
        """CPU at one end of a control message in the predictions (the assumption if set)."""
        m = self.assumptions.message_cpu_s
        return self.message_cpu_s if m is None else m

    # ------------------------------------------------------------ the lab itself (this host)

    def lab(self, n):
        """The fitted curves on this machine (to draw over the measured points): the old
        design's, and the design as built's (``tree_*``) where it was fitted."""
        out = {
            "init_call_s": self.init_lab[0] + self.init_lab[1] * store_requests_today(n, design="star")
            + self.init_lab[2] * (n - 1),
            "latency_8b_s": self.latency_tcp[0] + self.latency_tcp[1] * ring_steps(n),
            "latency_8b_shm_s": self.latency_shm[0] + self.latency_shm[1] * ring_steps(n),
            "rank0_cpu_s_per_step": self.rank0_cpu[0] + self.rank0_cpu[1] * (n - 1),
            "crash_detect_s": self.crash_lab[0] + self.crash_lab[1] * (n - 1),
        }
        if self.tree:
            t = self.tree
            out.update({
                "tree_init_call_s": t.init_lab[0] + t.init_lab[1] * (n - 1),
                "tree_latency_8b_s": t.latency_tcp_lab[0] + t.latency_tcp_lab[1] * (n - 1),
                "tree_rank0_cpu_s_per_step": t.rank0_cpu[0] + t.rank0_cpu[1] * math.log2(n),
                "tree_crash_detect_s": t.crash_lab[0] + t.crash_lab[1] * (n - 1),
            })
        return out

    # ------------------------------------------------------------ the old design: star + full mesh

    def old(self, n):
        """The star and the full mesh as the lab first measured them, at n ranks (one rank
        per core, hosts ``hop_s`` apart). A dict of figures, each named as in the lab's rows."""
        a = self.assumptions
        rtt = 2 * a.hop_s
        requests = store_requests_today(n, design="star")
        store_s = requests * self.store_request_cpu_s / a.store_cores
        # every rank read n-1 host records and r addresses: ~1.5 n^2 records through the store's link
        bytes_s = requests * a.record_bytes / a.link_bytes_per_s
        chain_s = 2 * (n - 1) * rtt + (n - 1) * a.handshake_round_trips * rtt  # the last rank's reads + connects
        accept_s = 3 * (n - 1) * a.handshake_round_trips * rtt  # rank 0's one acceptor thread
        msgs0 = self.rank0_messages[0] + self.rank0_messages[1] * (n - 1)
        # a request up, rank 0 reads n-1 requests and writes n-1 responses, a response down
        negotiation_s = 2 * a.hop_s + 2 * (n - 1) * self.message_s
        interval = heartbeat_interval_s(a.peer_timeout_s)
        frames = heartbeat_rank0_frames_per_s_today(n, a.peer_timeout_s, design="star")
        fds0 = rank0_sockets_today(n, design="star") + self.base_fds_rank0
        fds1 = worker_sockets_today(n, design="star", rank=1) + self.base_fds_worker
        return {
            "init_s": self.init_fixed_s + max(store_s, bytes_s, chain_s, accept_s),
            "store_requests": requests,
            "rank0_control_messages_per_step": msgs0,
            "busiest_other_messages_per_step": self.worker_messages,
            "rank0_control_bytes_per_step": self.rank0_bytes[0] + self.rank0_bytes[1] * (n - 1),
            "rank0_cpu_s_per_step": self.rank0_cpu[0] + self.rank0_cpu[1] * (n - 1),
            "rank0_fds": fds0,
            "worker_fds": fds1,
            "max_fds": max(fds0, fds1),
            "latency_8b_s": negotiation_s + ring_steps(n) * a.hop_s,
            "heartbeat_rank0_frames_per_s": 2 * frames,  # sent + received
            "heartbeat_rank0_bytes_per_s": 2 * frames * HEARTBEAT_FRAME_BYTES,
            "heartbeat_rank0_wire_bytes_per_s": 2 * frames * (HEARTBEAT_FRAME_BYTES + TCP_FRAME_OVERHEAD_BYTES),
            "heartbeat_rank0_cpu_share": 2 * frames * self.message_s,
            "crash_detect_s": self.crash_detect_s,  # every survivor holds a socket to the dead rank
            "freeze_detect_s": a.peer_timeout_s + interval + (n - 2) * self.message_s + a.hop_s,
            "rss_mb": self.rss_mb[0] + self.rss_mb[1] * (n - 1),
        }

    # ------------------------------------------------------------ the design as built: tree + lazy

    def now(self, n):
        """The design as built (fitted to its own lab runs), same assumptions:
        negotiation over the control tree (fanout CONTROL_FANOUT: rank 0 answers its F
        children once per round; a cached tensor goes up as a bit per subtree and the
        response comes down, 2 x depth relays, each receiving and sending one message);
        lazy data connections (a rank connects to the peers its collectives use: its
        recursive-doubling partners, and the ring's two neighbours for large allreduces);
        heartbeats in a ring; init through the job's layout (rank 0 reads the n entries one
        by one, every rank reads the layout once, a size that grows with the hosts, and the
        cards of the 2-3 peers it dials: init_store_read_bytes through the store's link);
        recursive doubling for the 8-byte allreduce. PREDICTIONS past the sizes measured."""
        if self.tree is None:
            raise ValueError("Model.now needs the tree + lazy lab runs (Model.fit(..., tree_runs=...))")
        a, t = self.assumptions, self.tree
        rtt = 2 * a.hop_s
        depth = control_tree_depth(n)
        rounds = t.rounds_at(n)
        msgs0 = control_children(n, 0, "tree") * rounds
        gather_s = (n - 1) * (rtt + self.store_request_cpu_s)  # rank 0 GETs each entry in turn
        spread_s = init_store_read_bytes(n, a) / a.link_bytes_per_s  # entries, layouts and cards
        store_s = store_requests_today(n) * self.store_request_cpu_s / a.store_cores
        connect_s = 2 * a.handshake_round_trips * rtt  # its control parent, its heartbeat neighbours (in parallel)
        data_peers = recursive_doubling_partners(n) + 2  # + the ring's neighbours (large allreduces)
        fds0 = rank0_sockets_today(n, data_peers=data_peers) + self.base_fds_rank0
        fds1 = worker_sockets_today(n, rank=1, data_peers=data_peers) + self.base_fds_worker
        interval = heartbeat_interval_s(a.peer_timeout_s)
        relay_s = a.hop_s + 2 * self.message_s
        frames = heartbeat_rank0_frames_per_s_today(n, a.peer_timeout_s)
        return {
            "init_s": self.init_fixed_s + max(store_s, gather_s) + spread_s + connect_s,
            "store_requests": store_requests_today(n),
            "store_read_bytes": init_store_read_bytes(n, a),
            "rank0_control_messages_per_step": msgs0,
            "busiest_other_messages_per_step": t.busiest_other_messages,
            "rank0_control_bytes_per_step": msgs0 * t.bytes_per_message,
            "rank0_cpu_s_per_step": t.rank0_cpu[0] + t.rank0_cpu[1] * math.log2(max(n, 2)),
            "rank0_fds": fds0,
            "worker_fds": fds1,
            "max_fds": max(fds0, fds1),
            "latency_8b_s": 2 * depth * relay_s + recursive_doubling_steps(n) * a.hop_s,
            "heartbeat_rank0_frames_per_s": 2 * frames,
            "heartbeat_rank0_bytes_per_s": 2 * frames * HEARTBEAT_FRAME_BYTES,
            "heartbeat_rank0_wire_bytes_per_s": 2 * frames * (HEARTBEAT_FRAME_BYTES + TCP_FRAME_OVERHEAD_BYTES),
            "heartbeat_rank0_cpu_share": 2 * frames * self.message_s,
            # ranks without a socket to the dead one hear of it from tree neighbour to neighbour
            "crash_detect_s": self.crash_detect_s + 2 * depth * relay_s,
            "freeze_detect_s": a.peer_timeout_s + interval + 2 * depth * relay_s,
            "rss_mb": self.rss_mb[0] + self.rss_mb[1] * (rank0_sockets_today(n, data_peers=data_peers) - 1),
        }

    def to_dict(self):
        return dataclasses.asdict(self)


BUDGETS = (
    # (what, figure of Model.old() / Model.now(), budget, why that budget)
    ("the most descriptors a rank holds", "max_fds", 1024, "the default soft `ulimit -n`: past it init fails"),
    ("8-byte allreduce", "latency_8b_s", 1e-3, "issue 31's target at 1,024 ranks"),
    ("rank 0's CPU per cached step", "rank0_cpu_s_per_step", 10e-3, "a small model's whole step"),
    ("heartbeats at rank 0", "heartbeat_rank0_cpu_share", 0.01, "1% of rank 0's core"),
    ("init", "init_s", 10.0, "issue 30's target at 1,024 ranks"),
)


def crossing(model, key, budget, design="old", largest=1 << 20):
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
    """The limits in the order a growing job hits them in the design as built: rows of
    (what, old design's figure at ``n``, budget, why, the size that crosses it in the old
    design, the built design's figure at ``n``, the size that crosses it there), smallest
    crossing of the built design first (never crossed last)."""
    rows = []
    for what, key, budget, why in BUDGETS:
        rows.append((what, model.old(n)[key], budget, why, crossing(model, key, budget),
                     model.now(n)[key], crossing(model, key, budget, "now")))
    return sorted(rows, key=lambda row: (row[6] if row[6] is not None else float("inf"),
                                         row[4] if row[4] is not None else float("inf")))


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
