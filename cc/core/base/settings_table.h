// The table of every TFRING_* setting, as one X-macro: the single source of the settings'
// names, types, defaults, bounds, descriptions (docs/configuration.md is generated from it),
// whether every rank must use the same value, and the typed field each becomes in
// `Settings` (config.h). Add a setting here and nowhere else; its field is then read once,
// at Config::Load.
//
// X(field, NAME, TYPE, DEFAULT, MIN, MAX, MATCH, DESCRIPTION, CHOICES, CHECK)
//   TYPE: kInt (int64_t), kFloat (double), kBool (bool), kString, kEnum (std::string)
//   MIN, MAX: inclusive numeric bounds (ignored for strings and bools)
//   MATCH: kMustMatch (changes what goes on the wire: init fails on every rank when a rank's
//          value differs from rank 0's, naming the rank), kMustMatchWithShm (the same, but
//          only where TFRING_SHM is on: it means nothing without shared memory) or kPerRank
//   CHOICES: kEnum's accepted values, '|'-separated; CHECK: a syntax check of a kString, or
//          nullptr (a higher layer may register one: RegisterParamCheck)
#pragma once

// Documentation order.
#define TFRING_SETTINGS(X) \
  /* Identity of this process in the job (set by tfringrun or a scheduler). */ \
  X(rank, "TFRING_RANK", kInt, "0", 0, 1 << 24, kPerRank, \
      "Global rank of this process.", \
      nullptr, nullptr) \
  X(size, "TFRING_SIZE", kInt, "1", 1, 1 << 24, kPerRank, \
      "Number of processes in the job.", \
      nullptr, nullptr) \
  X(local_rank, "TFRING_LOCAL_RANK", kInt, "0", 0, 1 << 24, kPerRank, \
      "Rank among the processes on this host.", \
      nullptr, nullptr) \
  X(local_size, "TFRING_LOCAL_SIZE", kInt, "1", 1, 1 << 24, kPerRank, \
      "Number of processes on this host.", \
      nullptr, nullptr) \
  X(cross_rank, "TFRING_CROSS_RANK", kInt, "0", 0, 1 << 24, kPerRank, \
      "Index of this host among the job's hosts.", \
      nullptr, nullptr) \
  X(cross_size, "TFRING_CROSS_SIZE", kInt, "1", 1, 1 << 24, kPerRank, \
      "Number of hosts in the job.", \
      nullptr, nullptr) \
  X(store_addr, "TFRING_STORE_ADDR", kString, "", 0, 0, kPerRank, \
      "host:port of the job's rendezvous store (served by tfringrun). Required when TFRING_SIZE > 1.", \
      nullptr, nullptr) \
  X(store_serve, "TFRING_STORE_SERVE", kBool, "0", 0, 0, kPerRank, \
      "Rank 0 serves the job's store itself, on the port of TFRING_STORE_ADDR (every interface, " \
      "or TFRING_BIND_ADDR): N processes started without a launcher (Kubernetes Indexed Jobs, " \
      "Spark barrier tasks, srun) form a job from TFRING_STORE_ADDR=<rank 0's host>:<port>, " \
      "TFRING_SECRET, TFRING_RANK and TFRING_SIZE alone. The others wait for it up to " \
      "TFRING_START_TIMEOUT_S (a name that does not resolve yet is retried).", \
      nullptr, nullptr) \
  X(secret, "TFRING_SECRET", kString, "", 0, 0, kPerRank, \
      "Per-job secret that authenticates every connection (hex; set by tfringrun, never logged).", \
      nullptr, nullptr) \
  X(job_id, "TFRING_JOB_ID", kString, "default", 0, 0, kPerRank, \
      "Namespace of this job's keys in the store.", \
      nullptr, nullptr) \
  /* Time limits. */ \
  X(timeout_s, "TFRING_TIMEOUT_S", kFloat, "30", 0.1, 1e6, kPerRank, \
      "Limit for any single network wait once the job runs (store request, connect, transfer).", \
      nullptr, nullptr) \
  X(start_timeout_s, "TFRING_START_TIMEOUT_S", kFloat, "120", 0.1, 1e6, kPerRank, \
      "How long init() waits for every rank to reach the rendezvous.", \
      nullptr, nullptr) \
  X(shutdown_timeout_s, "TFRING_SHUTDOWN_TIMEOUT_S", kFloat, "10", 0, 1e6, kPerRank, \
      "How long shutdown() waits for the background thread to finish; half of it bounds the " \
      "finalize of NCCL communicators after a clean job (then they are aborted).", \
      nullptr, nullptr) \
  X(peer_timeout_s, "TFRING_PEER_TIMEOUT_S", kFloat, "30", 0, 1e6, kPerRank, \
      "A peer whose tfring runtime has not answered heartbeats for this long (a frozen " \
      "process, a paused VM, a cut network) is lost: every collective fails naming it " \
      "(0 = never; heartbeats run on their own thread, so slow user code never trips it). " \
      "Also the TCP keepalive / user timeout of every connection.", \
      nullptr, nullptr) \
  X(stall_warning_s, "TFRING_STALL_WARNING_S", kFloat, "60", 0, 1e6, kPerRank, \
      "Warn when a tensor submitted by some ranks waits this long for the others (0 = never).", \
      nullptr, nullptr) \
  X(stall_shutdown_s, "TFRING_STALL_SHUTDOWN_S", kFloat, "0", 0, 1e6, kPerRank, \
      "Fail a tensor with a timeout error when it stalls this long (0 = never).", \
      nullptr, nullptr) \
  /* Performance. */ \
  X(fusion_threshold, "TFRING_FUSION_THRESHOLD", kInt, "67108864", 0, 1LL << 40, kPerRank, \
      "Largest fused buffer in bytes; tensors of one dtype/op are packed up to this size (0 = no fusion).", \
      nullptr, nullptr) \
  X(fusion_in_place_bytes, "TFRING_FUSION_IN_PLACE_BYTES", kInt, "-1", -1, 1LL << 40, kMustMatch, \
      "Tensors of at least this many bytes in a fused group are reduced where they are (a " \
      "ring each) instead of being copied into the fusion buffer and back: the copies cost " \
      "more than one ring's start-up beyond this size. -1 (default): 256 KiB when all the " \
      "group's ranks are on one host (shared memory), 4 MiB otherwise (TCP). Must be the " \
      "same on every rank (init fails naming the rank otherwise).", \
      nullptr, nullptr) \
  X(cache_capacity, "TFRING_CACHE_CAPACITY", kInt, "1024", 0, 1LL << 24, kPerRank, \
      "How many tensors get a cache id, so that repeating them (a training step) negotiates " \
      "one bit per tensor instead of the whole request (0 = no cache). Rank 0 keeps each " \
      "rank's request per id (~150 bytes).", \
      nullptr, nullptr) \
  X(data_connections, "TFRING_DATA_CONNECTIONS", kEnum, "auto", 0, 0, kMustMatch, \
      "When ranks open their TCP data connections. all: a full mesh at init (n-1 sockets per " \
      "rank); lazy: each pair when a collective first needs it, so a rank holds sockets only " \
      "to the peers its algorithms use (ring neighbours, recursive-doubling partners, ...): " \
      "fewer descriptors and a faster init on large jobs, a connection's cost on the first " \
      "collective with each peer. auto (default): all up to 8 ranks, lazy beyond. Every rank " \
      "must use the same value.", \
      "auto|all|lazy", nullptr) \
  X(control_fanout, "TFRING_CONTROL_FANOUT", kInt, "4", 0, 1 << 20, kMustMatch, \
      "Children per rank in the control tree that carries negotiation (requests up to rank 0, " \
      "responses down): rank 0 exchanges messages with this many ranks per step whatever the " \
      "job's size, and a cached step costs every rank one message each way. 0: a star, every " \
      "rank talks to rank 0 directly. Every rank must use the same value.", \
      nullptr, nullptr) \
  X(control_hold_us, "TFRING_CONTROL_HOLD_US", kFloat, "200", 0, 1e6, kPerRank, \
      "How long a rank other than 0 first holds new requests back while its last message to " \
      "its control parent is unanswered, to send them up as one message (microseconds). A " \
      "message goes up at once when nothing is unanswered (a lone collective waits for " \
      "nothing); held requests go up when the parent's responses arrive or the hold ends. " \
      "Each hold that ends unanswered doubles the next, up to TFRING_CONTROL_HOLD_MAX_US. " \
      "0: every batch of submissions goes up at once.", \
      nullptr, nullptr) \
  X(control_hold_max_us, "TFRING_CONTROL_HOLD_MAX_US", kFloat, "3200", 0, 1e7, kPerRank, \
      "The longest hold of TFRING_CONTROL_HOLD_US after holds that ended unanswered " \
      "(microseconds; at least TFRING_CONTROL_HOLD_US).", \
      nullptr, nullptr) \
  X(cycle_time_ms, "TFRING_CYCLE_TIME_MS", kFloat, "1", 0, 10000, kPerRank, \
      "While more tensors are still arriving, how long the coordinator waits to fuse them " \
      "with those already ready (ms).", \
      nullptr, nullptr) \
  X(spin_us, "TFRING_SPIN_US", kInt, "50", 0, 1000000, kPerRank, \
      "How long a waiting thread spins, yielding its core, before it sleeps: a transfer, the background " \
      "thread between collectives, a NumPy call waiting for its result (microseconds; latency vs CPU). " \
      "Unset, with more ranks on this host than CPUs, it is 0.", \
      nullptr, nullptr) \
  X(keep_freed_memory, "TFRING_KEEP_FREED_MEMORY", kBool, "1", 0, 0, kPerRank, \
      "At init, set glibc's malloc trim threshold to 256 MiB and its mmap threshold to 32 MiB, so that " \
      "the large buffers TensorFlow allocates and frees on every step are reused instead of returned " \
      "to the kernel and faulted in again (on VMs such a call stalls for 40-150 ms). Resident memory " \
      "then stays at its high-water mark. Never overrides GLIBC_TUNABLES' or MALLOC_*_ thresholds.", \
      nullptr, nullptr) \
  X(chunk_bytes, "TFRING_CHUNK_BYTES", kInt, "262144", 1024, 1LL << 32, kPerRank, \
      "Granularity at which received data is reduced while the rest is still in flight.", \
      nullptr, nullptr) \
  X(recursive_doubling_bytes, "TFRING_RECURSIVE_DOUBLING_BYTES", kInt, "65536", 0, 1LL << 40, kMustMatch, \
      "Host-memory allreduces of at most this many bytes (a fused group counts as one) run by " \
      "recursive doubling (log2 n steps, each moving the whole buffer) instead of the ring " \
      "(2(n-1) steps moving 1/n of it): the latency of small tensors. 0: always the ring. " \
      "Every rank must use the same value.", \
      nullptr, nullptr) \
  X(rabenseifner_bytes, "TFRING_RABENSEIFNER_BYTES", kInt, "1048576", 0, 1LL << 40, kMustMatch, \
      "Host-memory allreduces larger than TFRING_RECURSIVE_DOUBLING_BYTES and of at most this many " \
      "bytes, on 8 or more ranks (a power of two) that reach each other by TCP only (one rank per " \
      "host, or TFRING_SHM=0) and not hierarchical, run Rabenseifner's algorithm (reduce-scatter by " \
      "recursive halving, allgather by recursive doubling: 2 log2 n steps moving the ring's bytes) " \
      "instead of the ring (2(n-1) steps). 0: never. Every rank must use the same value.", \
      nullptr, nullptr) \
  X(hierarchical_allreduce, "TFRING_HIERARCHICAL_ALLREDUCE", kBool, "1", 0, 0, kMustMatch, \
      "On several hosts with the same number of ranks each, host-memory allreduces above " \
      "TFRING_RECURSIVE_DOUBLING_BYTES reduce inside each host first, then across hosts on " \
      "1/L of the buffer per local rank, then gather inside the host: each host's link " \
      "carries 2(H-1)/H of the buffer instead of the flat ring's 2(N-1)/N. 0: the flat ring. " \
      "Every rank must use the same value.", \
      nullptr, nullptr) \
  X(hierarchical_block_bytes, "TFRING_HIERARCHICAL_BLOCK_BYTES", kInt, "2097152", 0, 1LL << 40, kMustMatch, \
      "Hierarchical allreduces of at least twice this many bytes are cut into blocks of about " \
      "this size (at most 16), and the cross-host phase of each block overlaps the phases " \
      "inside the host of the others (a helper thread), so the network link does not wait for " \
      "shared memory. 0: the three phases one after the other. Every rank must use the same value.", \
      nullptr, nullptr) \
  X(hierarchical_allgather, "TFRING_HIERARCHICAL_ALLGATHER", kBool, "1", 0, 0, kMustMatch, \
      "On several hosts with the same number of ranks each, host-memory allgathers over every " \
      "rank gather across hosts first (the ranks of each local index at once, each with its own " \
      "block), then inside each host: each host's link carries (H-1)/H of the output instead of " \
      "the flat ring's (N-1)/N. 0: the flat ring. Every rank must use the same value.", \
      nullptr, nullptr) \
  X(hierarchical_broadcast, "TFRING_HIERARCHICAL_BROADCAST", kBool, "1", 0, 0, kMustMatch, \
      "On several hosts with the same number of ranks each, host-memory broadcasts over every " \
      "rank larger than TFRING_RECURSIVE_DOUBLING_BYTES scatter the buffer inside the root's host, " \
      "broadcast each local rank's 1/L across hosts (L chains at once), and allgather inside each " \
      "host. 0: the flat chain. Every rank must use the same value.", \
      nullptr, nullptr) \
  X(hierarchical_reducescatter, "TFRING_HIERARCHICAL_REDUCESCATTER", kBool, "1", 0, 0, kMustMatch, \
      "On several hosts with the same number of ranks each, host-memory reduce-scatters over " \
      "every rank reduce inside each host first (local rank l: the blocks of local index l of " \
      "every host), then across hosts among the ranks of each local index: each host's link " \
      "carries (H-1)/H of the buffer instead of the flat ring's (N-1)/N. 0: the flat ring. " \
      "Every rank must use the same value.", \
      nullptr, nullptr) \
  X(algorithm, "TFRING_ALGORITHM", kString, "auto", 0, 0, kMustMatch, \
      "Pins the algorithm of host-memory collectives for the whole job, to compare them: auto " \
      "(the selection table, docs/algorithms.md) or comma-separated OP=ALGORITHM, e.g. " \
      "'allreduce=ring,broadcast=hierarchical' (allreduce: ring, recursive_doubling, rabenseifner, hierarchical_doubling, " \
      "hierarchical; allgather and reducescatter: ring, hierarchical; broadcast: chain, " \
      "hierarchical; each also auto). A pin that cannot run on the job (hierarchical on one host, or on a process set whose hosts do not allow it) " \
      "leaves the choice to the table. Every rank must use the same value.", \
      nullptr, nullptr) \
  /* syntax: collectives/algorithm.cc registers its check */ \
  X(shm, "TFRING_SHM", kBool, "1", 0, 0, kMustMatch, \
      "Move data between ranks on the same host through shared memory (0 = always TCP).", \
      nullptr, nullptr) \
  X(shm_control, "TFRING_SHM_CONTROL", kBool, "1", 0, 0, kMustMatchWithShm, \
      "Negotiation messages between rank 0 and the ranks on its host go through shared memory " \
      "as well (with TFRING_SHM; 0 = always TCP). Every rank must set it alike.", \
      nullptr, nullptr) \
  X(shm_ring_bytes, "TFRING_SHM_RING_BYTES", kInt, "4194304", 4096, 1LL << 31, kPerRank, \
      "Size of each shared-memory ring (one per direction per local pair); a power of two.", \
      nullptr, nullptr) \
  X(shm_cma, "TFRING_SHM_CMA", kEnum, "auto", 0, 0, kPerRank, \
      "Single-copy sends between ranks on the same host: the receiver reads large sends " \
      "straight from the sender's buffer with process_vm_readv (Cross Memory Attach). auto " \
      "(default): where a probe at start shows the kernel allows it and every rank on the " \
      "machine has a CPU of its own (else the rings, silently); 0: never; 1: required (init " \
      "fails where the kernel does not allow it).", \
      "auto|0|1|true|false", nullptr) \
  X(shm_cma_min_bytes, "TFRING_SHM_CMA_MIN_BYTES", kInt, "1048576", 1, 1LL << 40, kPerRank, \
      "Smallest send (one ring step's segment) that goes single-copy under TFRING_SHM_CMA.", \
      nullptr, nullptr) \
  /* Autotuning (control/autotuner.h; docs/configuration.md, "Autotuning"). Read on rank 0. */ \
  X(autotune, "TFRING_AUTOTUNE", kBool, "0", 0, 0, kPerRank, \
      "Tune the settings that do not change what a collective computes (fusion threshold, cycle " \
      "time, control hold, recursive-doubling threshold, chunk and hierarchical block sizes) while " \
      "the job runs, scored by the bytes allreduced per second; rank 0 decides and every rank " \
      "switches at the same response. A setting given explicitly (environment or init argument) " \
      "is never tuned. Rank 0's value counts.", \
      nullptr, nullptr) \
  X(autotune_log, "TFRING_AUTOTUNE_LOG", kString, "", 0, 0, kPerRank, \
      "Rank 0 writes the autotuner's trials to this CSV file: a header, one row per trial (the " \
      "settings tried and the score in bytes per second), then the best setting kept.", \
      nullptr, nullptr) \
  X(autotune_warmup_samples, "TFRING_AUTOTUNE_WARMUP_SAMPLES", kInt, "3", 0, 1 << 20, kPerRank, \
      "Samples the autotuner runs and discards before its first trial (start-up, caches).", \
      nullptr, nullptr) \
  X(autotune_steps_per_sample, "TFRING_AUTOTUNE_STEPS_PER_SAMPLE", kInt, "10", 1, 1 << 20, kPerRank, \
      "Steps in one autotuner sample: a sample ends when some tensor has been allreduced this " \
      "many times in it (a training step allreduces each gradient once).", \
      nullptr, nullptr) \
  X(autotune_max_samples, "TFRING_AUTOTUNE_MAX_SAMPLES", kInt, "32", 1, 1 << 20, kPerRank, \
      "Most scored trials (the defaults' first among them); the search ends sooner when every " \
      "candidate was tried (one pass: 25 trials on one host, 30 on several).", \
      nullptr, nullptr) \
  X(autotune_min_gain, "TFRING_AUTOTUNE_MIN_GAIN", kFloat, "0.05", 0, 10, kPerRank, \
      "A candidate replaces the best setting so far only when it scores this fraction more " \
      "(the search's guard against measurement noise).", \
      nullptr, nullptr) \
  /* Networking and diagnostics. */ \
  X(bind_addr, "TFRING_BIND_ADDR", kString, "", 0, 0, kPerRank, \
      "Address the data listener binds and advertises (default: the local address that " \
      "reached the store). A wildcard (0.0.0.0, ::) binds every interface and advertises " \
      "the address that reached the store.", \
      nullptr, nullptr) \
  X(timeline, "TFRING_TIMELINE", kString, "", 0, 0, kPerRank, \
      "Rank 0 writes a Chrome-trace/Perfetto JSON timeline of every collective to this path.", \
      nullptr, nullptr) \
  X(log_level, "TFRING_LOG_LEVEL", kString, "warning", 0, 0, kPerRank, \
      "Log level: trace, debug, info, warning, error (any case; fatal reads as error); per subsystem as LEVEL,SUBSYSTEM=LEVEL,... " \
      "(subsystems: runtime, transport, store, stall, cpu, gpu, nccl), e.g. warning,transport=debug.", \
      nullptr, CheckLogLevel) \
  /* GPU (NCCL backend; read from the environment when the libraries are first loaded). */ \
  X(nccl_library, "TFRING_NCCL_LIBRARY", kString, "", 0, 0, kPerRank, \
      "Path of libnccl.so.2 for GPU tensors (default: an already loaded copy, the pip package " \
      "nvidia-nccl-cu12/cu13 under site-packages, then the system loader path).", \
      nullptr, nullptr) \
  X(cuda_runtime_library, "TFRING_CUDA_RUNTIME_LIBRARY", kString, "", 0, 0, kPerRank, \
      "Path of the CUDA runtime (libcudart.so.12) for GPU tensors (default: an already loaded " \
      "copy, the pip package nvidia-cuda-runtime-cu12 under site-packages, then the system " \
      "loader path).", \
      nullptr, nullptr)
