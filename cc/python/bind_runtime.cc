// tfring._core: the runtime's life cycle, ranks, the core's tables, settings, stats, timeline
// and build facts.
#include "bindings.h"

#include <pybind11/stl.h>

#include "backends/backend.h"
#include "base/config.h"
#include "runtime/runtime.h"

namespace tfring {
namespace python {

namespace {

// Life cycle and the job's shape: init, shutdown, health, ranks.
void BindLifecycle(py::module_& m) {
  m.def("init", [](const std::map<std::string, std::string>& overrides) {
    Status st;
    {
      py::gil_scoped_release release;
      st = Runtime::Global().Init(overrides);
    }
    Check(st);
  }, py::arg("overrides") = std::map<std::string, std::string>{},
     "Initializes the runtime (rendezvous with every rank). Blocking, bounded by TFRING_START_TIMEOUT_S.");
  m.def("shutdown", [](const std::string& reason) {
    Status st;
    {
      py::gil_scoped_release release;
      st = Runtime::Global().Shutdown(reason);
    }
    Check(st);
  }, py::arg("reason") = "",
     "Stops the runtime; pending collectives fail. Idempotent. A reason tells the other ranks why.");
  m.def("is_initialized", [] { return Runtime::Global().initialized(); });
  m.def("check_health", [] { Check(Runtime::Global().Health()); },
        "Raises the job's fatal error (PeerLostError, ...) once collectives can no longer succeed; "
        "returns None while they can. Never blocks.");
  auto require = [](int v) {
    if (v < 0) Raise(Status::Precondition("tfring is not initialized: call tfring.init() (hvd.init()) first"));
    return v;
  };
  m.def("rank", [require] { return require(Runtime::Global().rank()); });
  m.def("size", [require] { return require(Runtime::Global().size()); });
  m.def("local_rank", [require] { return require(Runtime::Global().local_rank()); });
  m.def("local_size", [require] { return require(Runtime::Global().local_size()); });
  m.def("cross_rank", [require] { return require(Runtime::Global().cross_rank()); });
  m.def("cross_size", [require] { return require(Runtime::Global().cross_size()); });
  m.def("is_homogeneous", [require] { return require(Runtime::Global().homogeneous()) == 1; },
        "True when every host runs the same number of ranks.");

}

// {name: value(code)} over the core's error codes, OK excluded.
template <typename F>
std::map<std::string, int> ByErrorCode(F value) {
  std::map<std::string, int> out;
  for (int c = 1; std::string(ErrorCodeName(static_cast<ErrorCode>(c))) != "UNKNOWN"; ++c) {
    out[ErrorCodeName(static_cast<ErrorCode>(c))] = value(static_cast<ErrorCode>(c));
  }
  return out;
}

// The core's enumerations by name, so Python never retypes their values.
void BindTables(py::module_& m) {
  m.def("error_codes", [] { return ByErrorCode([](ErrorCode c) { return static_cast<int>(c); }); },
        "{name: value} of the core's error codes (cc/core/base/status.h), OK excluded.");
  m.def("canonical_error_codes", [] { return ByErrorCode(CanonicalCode); },
        "{name: canonical status code} of the core's error codes (CanonicalCode in cc/core/base/status.h): "
        "the tf.errors class each becomes, as the TF kernels map it.");
  m.def("reduce_ops", [] {
    std::map<std::string, int> out;
    for (int op = 0; op < kNumReduceOps; ++op) out[ReduceOpName(static_cast<ReduceOp>(op))] = op;
    return out;
  }, "{name: value} of the core's reduce ops (cc/core/base/data_type.h).");
  m.def("data_types", [] {
    std::map<std::string, int> out;
    for (int t = 0; t < kNumDataTypes; ++t) out[DataTypeName(static_cast<DataType>(t))] = t;
    return out;
  }, "{name: value} of the core's element types (cc/core/base/data_type.h).");
}

// Settings: the effective values, the table of every setting, validation.
void BindSettings(py::module_& m) {
  m.def("config", [] {
    py::dict out;
    for (const auto& kv : Runtime::Global().config_values()) {
      bool secret = kv.first == "TFRING_SECRET";
      out[py::str(kv.first)] = py::make_tuple(secret && !kv.second.text.empty() ? "<hidden>" : kv.second.text,
                                              kv.second.source);
    }
    return out;
  }, "Effective settings: {name: (value, source)}; source is default, env or argument.");
  m.def("config_table", [] {
    py::list out;
    for (const auto& p : ParamTable()) {
      const char* type = p.type == ParamType::kInt ? "int" : p.type == ParamType::kFloat ? "float"
                         : p.type == ParamType::kBool ? "bool" : p.type == ParamType::kEnum ? "enum" : "str";
      py::dict d;
      d["name"] = p.name;
      d["type"] = type;
      d["default"] = p.default_value;
      d["min"] = p.min_value;
      d["max"] = p.max_value;
      d["description"] = p.description;
      d["choices"] = ParamChoices(p);
      d["must_match"] = p.match == ParamMatch::kMustMatch          ? "every rank"
                        : p.match == ParamMatch::kMustMatchWithShm ? "every rank, with TFRING_SHM"
                                                                   : "";
      out.append(d);
    }
    return out;
  }, "The table of every TFRING_* setting.");
  m.def("validate_config", [](const std::map<std::string, std::string>& values) {
    Config c;
    Check(Config::Load(values, false, &c));
  }, "Raises if the given settings are invalid (used by the launcher before it starts anything).");
}

// Monitoring: counters and the timeline.
void BindStats(py::module_& m) {
  m.def("stats", [] {
    RuntimeStats s = Runtime::Global().stats();
    py::dict d;
    d["collectives"] = s.collectives;
    d["tensors"] = s.tensors;
    d["fused_tensors"] = s.fused_tensors;
    d["fusion_ratio"] = s.collectives > 0 ? static_cast<double>(s.tensors) / s.collectives : 0.0;
    d["bytes_reduced"] = s.bytes_reduced;
    d["bytes_sent"] = s.bytes_sent;
    d["bytes_received"] = s.bytes_received;
    d["stall_warnings"] = s.stall_warnings;
    d["cached_tensors"] = s.cached_tensors;
    d["fusion_copied_bytes"] = s.fusion_copied_bytes;
    d["control_bytes_sent"] = s.control_bytes_sent;
    d["control_messages_sent"] = s.control_messages_sent;
    d["negotiation_seconds"] = s.negotiation_seconds;
    d["wait_for_slowest_seconds"] = s.wait_for_slowest_seconds;
    d["queue_seconds"] = s.queue_seconds;
    d["transfer_seconds"] = s.transfer_seconds;
    d["allreduce_transfer_seconds"] = s.allreduce_transfer_seconds;
    d["execute_seconds"] = s.execute_seconds;
    d["size"] = Runtime::Global().initialized() ? Runtime::Global().size() : 0;
    py::dict links;
    for (size_t peer = 0; peer < s.links.size(); ++peer) {
      const LinkStats& l = s.links[peer];
      py::dict e;
      e["host"] = l.host;
      e["shared_memory"] = l.shared_memory;
      e["bytes_sent"] = l.bytes_sent;
      e["bytes_received"] = l.bytes_received;
      e["single_copy_bytes_received"] = l.single_copy_bytes_received;
      e["send_seconds"] = l.send_seconds;
      e["recv_seconds"] = l.recv_seconds;
      links[py::int_(peer)] = e;
    }
    d["links"] = links;
    d["slow_link_host"] = s.slow_link_host;
    d["slow_link_ranks"] = s.slow_link_ranks;
    d["slow_link_ratio"] = s.slow_link_ratio;
    d["slow_link_warnings"] = s.slow_link_warnings;
    return d;
  }, "Counters since init (docs/monitoring.md defines each key).");
  m.def("start_timeline", [](const std::string& path) { Check(Runtime::Global().StartTimeline(path)); },
        py::arg("path"), "Rank 0 writes a Chrome-trace JSON of every collective to path.");
  m.def("stop_timeline", [] { Check(Runtime::Global().StopTimeline()); });
}

// Process sets and the build's facts.
void BindProcessSetsAndBuild(py::module_& m) {
  // Process sets: the core's table only; tfring/_basics/process_sets.py makes registration collective.
  m.def("add_process_set", [](int32_t id, const std::vector<int32_t>& ranks) {
    Check(Runtime::Global().AddProcessSet(id, ranks));
  }, py::arg("id"), py::arg("ranks"));
  m.def("remove_process_set", [](int32_t id) { Check(Runtime::Global().RemoveProcessSet(id)); },
        py::arg("id"));
  m.def("process_set_ranks", [](int32_t id) {
    std::vector<int32_t> ranks;
    Check(Runtime::Global().ProcessSetMembers(id, &ranks));
    return ranks;
  }, py::arg("id"), "Sorted global ranks of process set `id` (0: every rank).");
  m.def("build_info", [] {
    py::dict d;
    d["cpu"] = true;
    d["tcp"] = true;
    d["shm"] = true;
    d["nccl"] = GetGpuSupport() != nullptr;  // the NCCL backend is built in (see gpu_info)
    return d;
  });
  m.def("gpu_info", [] {
    py::dict d;
    GpuSupport* gpu = GetGpuSupport();
    d["built"] = gpu != nullptr;
    Status st = gpu ? gpu->Available() : Status::Unimplemented("built with TFRING_WITH_NCCL=0");
    d["available"] = st.ok();
    d["detail"] = gpu && st.ok() ? gpu->Describe() : st.message();
    return d;
  }, "Whether GPU tensors can run: built (NCCL backend compiled in), available (NCCL, the CUDA "
     "runtime and a device found now), detail (versions and paths, or what is missing).");
}

}  // namespace

void BindRuntime(py::module_& m) {
  BindLifecycle(m);
  BindTables(m);
  BindSettings(m);
  BindStats(m);
  BindProcessSetsAndBuild(m);
}

}  // namespace python
}  // namespace tfring
