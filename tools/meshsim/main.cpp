// meshsim: the command line. Parses arguments, calls the driver, prints.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <optional>
#include <system_error>

#include "base/error.hpp"
#include "driver/explain.hpp"
#include "driver/report.hpp"
#include "driver/simulate.hpp"
#include "frontends/load.hpp"
#include "tools/meshsim/commands.hpp"
#include "tools/meshsim/sweep.hpp"
#include "tools/meshsim/hardware_commands.hpp"
#include "tools/meshsim/progress.hpp"
#include "tools/meshsim/limit_options.hpp"
#include "verify/training_verifier.hpp"
#include "verify/verifier.hpp"
#include "workloads/workload.hpp"

namespace {

using meshsim::cli::fail;
using meshsim::cli::same_file;
using meshsim::cli::write_output;

// A whole string as a finite decimal number (no leading '+', no trailing text).
std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// --trace-window FROM:TO (microseconds) as ticks; throws Error when malformed or
// when TO, rounded to picoseconds, is not after FROM.
std::pair<meshsim::Tick, meshsim::Tick> parse_window(const std::string& text) {
  const std::string usage = "--trace-window: expected FROM:TO in microseconds with 0 <= FROM < TO, got '" + text + "'";
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw meshsim::Error(usage);
  const std::optional<double> from = parse_number(std::string_view(text).substr(0, colon));
  const std::optional<double> to = parse_number(std::string_view(text).substr(colon + 1));
  if (!from || !to || !(*from >= 0) || !(*to > *from) || *to > 1e12) throw meshsim::Error(usage);
  const meshsim::Tick a = meshsim::tick_from_seconds(*from * 1e-6), b = meshsim::tick_from_seconds(*to * 1e-6);
  if (b <= a)
    throw meshsim::Error("--trace-window: FROM and TO are the same picosecond, got '" + text + "'");
  return {a, b};
}

// Throws Error when the output paths collide with each other or with the workload.
void check_outputs(const std::string& workload, const std::string& json, const std::string& trace) {
  const bool json_file = !json.empty() && json != "-";
  if (json_file && same_file(json, workload))
    throw meshsim::Error("--json: '" + json + "' is the workload file; it would be overwritten");
  if (!trace.empty() && same_file(trace, workload))
    throw meshsim::Error("--trace: '" + trace + "' is the workload file; it would be overwritten");
  if (json_file && !trace.empty() && same_file(json, trace))
    throw meshsim::Error("--trace: '" + trace + "' is also the --json output; give them different files");
}

// --trace FILE: a .json, .pftrace or .pb file name.
void check_trace_path(const std::string& path) {
  const bool ok = (path.ends_with(".json") && path.size() > 5) || (path.ends_with(".pftrace") && path.size() > 8) ||
                  (path.ends_with(".pb") && path.size() > 3);
  if (!ok)
    throw meshsim::Error("--trace: expected a file name ending in .json, .pftrace or .pb, got '" + path + "'");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "meshsim: a discrete-event simulator of TPU mesh interconnects.\n"
      "Simulates sharded collectives hop by hop on the links of a 2D/3D torus and compares\n"
      "the simulated times with the closed forms of the scaling cheat sheet."};
  app.set_version_flag("--version", "meshsim 0.1.0");
  app.require_subcommand(1);

  CLI::App* run = app.add_subcommand("run", "Simulate a workload and print a table per op");
  std::string workload_path, json_path;
  std::size_t links = 0;
  bool quiet = false;
  run->add_option("WORKLOAD", workload_path,
                  "Workload JSON file (format: docs/WORKLOAD.md), an XLA HLO text dump (docs/HLO.md), or one rank's file "
                  "of a Chakra execution trace, PREFIX.<rank>.et[.gz] (docs/CHAKRA.md); the last two with --hardware and "
                  "--topology")
      ->required();
  std::string hlo_hardware, hlo_topology;
  run->add_option("--hardware", hlo_hardware,
                  "An HLO dump's or a Chakra trace's hardware: a TPU preset (tpu-v5e, ...); for a trace also a GPU "
                  "preset (h100-dgx, ...)")
      ->option_text("PRESET");
  run->add_option("--topology", hlo_topology,
                  "An HLO dump's or a Chakra trace's system: a TPU slice's shape, e.g. 4x4 or 4x4x4 (device d is chip "
                  "d, x fastest); a GPU cluster's node count, e.g. 2")
      ->option_text("SHAPE");
  std::vector<int> hlo_devices;
  run->add_option("--devices", hlo_devices,
                  "An HLO dump's device order or a Chakra trace's rank order: the chip of device (rank) 0, 1, ... "
                  "(comma-separated)")
      ->delimiter(',')
      ->option_text("CHIP,...");
  std::vector<int> import_wrap;
  run->add_option("--wraparound", import_wrap,
                  "An HLO dump's or a Chakra trace's TPU slice: per axis 1 (a ring) or 0 (a line), e.g. 1,1 "
                  "(default: the preset's for the shape)")
      ->delimiter(',')
      ->option_text("W,...");
  std::string comm_groups;
  run->add_option("--comm-groups", comm_groups,
                  "A Chakra trace's process groups, as ASTRA-sim takes them: JSON {\"<pg_name>\": [rank, ...], ...}")
      ->option_text("FILE");
  run->add_option("--json", json_path,
                  "Also write the results as JSON to FILE ('-' for stdout; fields: docs/OUTPUT.md)")
      ->option_text("FILE");
  run->add_option("--links", links, "Also list the N busiest link directions (bytes, busy time)")
      ->option_text("N")
      ->check(CLI::Range(0, 100000));
  run->add_flag("-q,--quiet", quiet, "Do not print the table (use with --json)");
  bool no_reduce = false;
  run->add_flag("--no-reduce", no_reduce,
                "Simulate every task, even of groups identical to another that shares nothing with it (the same "
                "results, byte for byte: docs/MODEL.md, \"Exact reductions\")");
  unsigned threads = 0;
  run->add_option("--threads", threads,
                  "Threads for the simulation: 1, or 2 to split a program into two parts simulated side by side "
                  "whenever it can be (the same results, byte for byte: docs/ARCHITECTURE.md, \"Two threads\"); "
                  "default: 2 for a run of 2^20 tasks or more on a machine with two cores, when its windows hold "
                  "4,096 tasks or more")
      ->option_text("N")
      ->check(CLI::Range(1, 2));
  bool critical = false;
  run->add_flag("--critical-path", critical,
                "Also print each op's critical path: the hops and computes its last byte waited for, and the time "
                "on the wire, in hop latency, queued behind other transfers and computing");
  std::string trace_path, trace_detail = "hops", trace_window;
  std::vector<std::uint32_t> trace_chips;
  std::size_t trace_max_events = 5'000'000;
  CLI::Option* trace_option = run->add_option("--trace", trace_path,
                  "Write a Perfetto trace (open it in ui.perfetto.dev): per chip its ops, compute and every link "
                  "direction, hop by hop. FILE.json: Chrome JSON; FILE.pftrace (or .pb): Perfetto protobuf, ~5x smaller")
      ->option_text("FILE");
  run->add_option("--trace-detail", trace_detail,
                  "ops: op and compute slices and link counters; steps: + collective steps; hops: + every hop "
                  "transfer and flow arrows (default)")
      ->check(CLI::IsMember({"ops", "steps", "hops"}))
      ->needs(trace_option);
  run->add_option("--trace-chips", trace_chips, "Trace only these chip ids (comma-separated)")
      ->delimiter(',')
      ->option_text("ID,...")
      ->needs(trace_option);
  run->add_option("--trace-window", trace_window, "Trace only what overlaps FROM:TO microseconds")
      ->option_text("FROM:TO")
      ->needs(trace_option);
  run->add_option("--trace-max-events", trace_max_events, "Stop the trace at N events, with a warning (default 5000000)")
      ->option_text("N")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40))
      ->needs(trace_option);
  std::string engine = "native";
  run->add_option("--engine", engine,
                  "native (default): meshsim's hop-by-hop engine; simgrid: the same transfers as flows on SimGrid "
                  "(docs/CROSSCHECK.md); all: both, side by side per op with the difference in percent")
      ->check(CLI::IsMember({"native", "simgrid", "all"}));
  std::vector<std::string> simgrid_config;
  run->add_option("--simgrid-cfg", simgrid_config,
                  "An extra SimGrid setting, as its --cfg takes it (e.g. network/model:LV08); repeatable. meshsim's own "
                  "settings make a transfer alone on a link take latency + bytes / bandwidth (docs/CROSSCHECK.md)")
      ->option_text("KEY:VALUE");
  bool verify = false;
  run->add_flag("--verify", verify,
                "Also execute the lowered program on small random data (every chip its own shard, real data "
                "movement and sums) and check every result against the unsharded computation; a training step: "
                "every transformer layer's forward and backward ops on microbatch 0, its outputs and gradients "
                "against the unsharded layers");
  meshsim::driver::Limits limits;
  meshsim::cli::add_limit_options(*run, limits);

  CLI::App* explain = app.add_subcommand(
      "explain", "Explain how each matmul and layer is lowered: the cheat sheet's case, the shardings, the "
                 "collectives inserted and why, and their closed-form costs with the numbers filled in");
  std::string explain_path;
  explain->add_option("WORKLOAD", explain_path, "Workload JSON file (format: docs/WORKLOAD.md)")->required();
  std::string calibration_path;
  meshsim::tool::add_calibration_option(run, calibration_path);
  const auto hardware_command = meshsim::tool::add_hardware_commands(app);

  const meshsim::cli::Subcommand sweep = meshsim::cli::add_sweep_command(app);
  const meshsim::cli::Subcommand validate = meshsim::cli::add_validate_command(app);
  const meshsim::cli::Subcommand search = meshsim::cli::add_search_command(app);
  const meshsim::cli::Subcommand chakra_export = meshsim::cli::add_chakra_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    // The top-level help lists the options of every subcommand too.
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(std::string(e.what()) + " (see meshsim --help)");
  }

  if (sweep.parsed()) return sweep.run();
  if (validate.parsed()) return validate.run();
  if (chakra_export.parsed()) return chakra_export.run();
  if (search.parsed()) return search.run();
  try {
    if (const std::optional<int> rc = hardware_command()) return *rc;
    if (explain->parsed()) {
      const meshsim::workloads::Workload w = meshsim::workloads::load_workload(explain_path);
      std::fputs(meshsim::driver::format_explain(w).c_str(), stdout);
      return 0;
    }
    if (engine == "native" && !simgrid_config.empty())
      throw meshsim::Error("--simgrid-cfg: only with --engine simgrid or all");
    if (engine != "native") {
      const char* native_only = trace_option->count() > 0 ? "--trace" : critical ? "--critical-path" : links > 0 ? "--links" : nullptr;
      if (native_only) throw meshsim::Error(std::string(native_only) + ": only with --engine native");
    }
    if (trace_option->count() > 0) check_trace_path(trace_path);
    check_outputs(workload_path, json_path, trace_path);
    std::pair<meshsim::Tick, meshsim::Tick> window;
    if (!trace_window.empty()) window = parse_window(trace_window);
    meshsim::frontends::ProgramOptions program;
    program.hardware = hlo_hardware;
    program.topology = hlo_topology;
    program.wraparound = import_wrap;
    program.devices = hlo_devices;
    program.comm_groups = comm_groups;
    program.verify = verify;
    meshsim::frontends::Program loaded = meshsim::frontends::load_program(workload_path, program);
    const std::string imported = loaded.summary;  // an import's summary line
    meshsim::workloads::Workload w = std::move(loaded.workload);
    meshsim::tool::apply_calibration_file(w, calibration_path);
    // A training step that --verify cannot execute is refused before simulating.
    if (verify && w.training) meshsim::verify::check_training_verifiable(w);
    if (critical && w.training)
      throw meshsim::Error("--critical-path: a training step has thousands of ops; its per-stage breakdown says "
                           "where the time goes, and --trace FILE --trace-chips 0 shows one chip's timeline");
    meshsim::driver::SimulateOptions options;
    options.busiest_links = links;
    options.simgrid_config = simgrid_config;
    options.critical_path = critical;
    options.reduce = !no_reduce;
    options.threads = threads;
    options.limits = limits;
    options.trace_path = trace_path;
    options.trace.detail = trace_detail == "ops"     ? meshsim::traces::Detail::Ops
                           : trace_detail == "steps" ? meshsim::traces::Detail::Steps
                                                     : meshsim::traces::Detail::Hops;
    options.trace.chips = trace_chips;
    options.trace.max_events = trace_max_events;
    if (!trace_window.empty()) {
      options.trace.from = window.first;
      options.trace.to = window.second;
    }
    meshsim::cli::Progress progress(quiet);
    options.progress = progress.hook();
    const bool json_to_stdout = json_path == "-";
    if (engine == "all") {
      const meshsim::driver::RunResult native = meshsim::driver::simulate(w, options);
      options.engine = meshsim::driver::EngineKind::SimGrid;
      const meshsim::driver::RunResult simgrid = meshsim::driver::simulate(w, options);
      progress.clear();
      if (!quiet && !json_to_stdout) std::fputs(meshsim::driver::format_comparison(w, native, simgrid).c_str(), stdout);
      if (!json_path.empty()) write_output(json_path, meshsim::driver::format_comparison_json(w, native, simgrid));
    } else {
      if (engine == "simgrid") options.engine = meshsim::driver::EngineKind::SimGrid;
      const meshsim::driver::RunResult result = meshsim::driver::simulate(w, options);
      progress.clear();
      if (!result.trace_warning.empty()) std::fprintf(stderr, "meshsim: warning: %s\n", result.trace_warning.c_str());
      if (!quiet && !json_to_stdout) std::fputs((imported + meshsim::driver::format_table(w, result)).c_str(), stdout);
      if (!json_path.empty()) write_output(json_path, meshsim::driver::format_json(w, result));
    }
    if (verify && w.training) {
      const meshsim::verify::Report report = meshsim::verify::verify_training(w);
      std::fputs(("\n" + meshsim::verify::format_training_report(report)).c_str(), json_to_stdout ? stderr : stdout);
      if (!report.ok()) return fail(workload_path + ": verification failed: the lowered training step does not "
                                                    "compute the unsharded layers' activations and gradients");
    } else if (verify) {
      const meshsim::verify::Report report = meshsim::verify::verify(w);
      std::fputs(("\n" + meshsim::verify::format_report(report)).c_str(), json_to_stdout ? stderr : stdout);
      if (!report.ok()) return fail(workload_path + ": verification failed: the lowered program does not compute "
                                                    "the unsharded result");
    }
    return 0;
  } catch (const meshsim::InputError& e) {
    return fail(e.what());
  } catch (const meshsim::Error& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory");
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what());
  }
}
