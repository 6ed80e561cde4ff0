#include "sim_job.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "json_fields.h"
#include "strict_json.h"

namespace kvbench {

namespace {

using json = nlohmann::json;
using json_fields::Fields;

void write_json(const std::string& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(2) << '\n';
  if (!out.flush()) throw std::runtime_error(path + ": cannot be written");
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw kv::InputError(path, "", "cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return parse_strict(text.str(), path);
}

std::vector<std::string> strings(Fields& f, const std::string& key, const std::string& file) {
  const json* list = f.child(key);
  if (list == nullptr || !list->is_array()) json_fields::fail(file, f.at(key), "must be an array of strings");
  std::vector<std::string> out;
  for (const json& item : *list) {
    if (!item.is_string()) json_fields::fail(file, f.at(key), "must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

void write_sim_job(const std::string& path, const SimJob& job) {
  write_json(path, json{{"suite_spec", job.suite_spec},
                        {"suite_file", job.suite_file},
                        {"socs", job.socs},
                        {"noise_threshold", job.noise_threshold},
                        {"config_hash", job.config_hash},
                        {"models_dir", job.models_dir},
                        {"model", job.model},
                        {"workload", job.workload},
                        {"policy", job.policy},
                        {"l2", job.l2},
                        {"l0_bytes", job.l0_bytes},
                        {"l1_bytes", job.l1_bytes}});
}

SimJob read_sim_job(const std::string& path) {
  const json j = read_json(path);
  Fields f(j, "", path);
  SimJob job;
  job.suite_spec = f.string("suite_spec", "", true);
  job.suite_file = f.string("suite_file", "", true);
  job.socs = strings(f, "socs", path);
  job.noise_threshold = f.number("noise_threshold", 0.0);
  job.config_hash = f.string("config_hash", "", true);
  job.models_dir = f.string("models_dir", "", true);
  job.model = f.string("model", "", true);
  job.workload = f.string("workload", "", true);
  job.policy = f.string("policy", "", true);
  job.l2 = f.boolean("l2", false);
  job.l0_bytes = f.size("l0_bytes", 0);
  job.l1_bytes = f.size("l1_bytes", 0);
  f.done();
  return job;
}

void write_sim_result(const std::string& path, const SimChildResult& result) {
  write_json(path, json{{"prefill_tokens", result.prefill_tokens},
                        {"decode_tokens", result.decode_tokens},
                        {"synthetic", result.synthetic},
                        {"kernel_path", result.kernel_path}});
}

SimChildResult read_sim_result(const std::string& path) {
  const json j = read_json(path);
  Fields f(j, "", path);
  SimChildResult r;
  r.prefill_tokens = static_cast<int>(f.integer("prefill_tokens", 0, 0, 1 << 30));
  r.decode_tokens = static_cast<int>(f.integer("decode_tokens", 0, 0, 1 << 30));
  r.synthetic = f.boolean("synthetic", false);
  r.kernel_path = f.string("kernel_path", "", true);
  f.done();
  return r;
}

void write_sim_probe(const std::string& path, const SimProbe& probe) {
  write_json(path, json{{"kernel_path", probe.kernel_path},
                        {"kernel_paths", probe.kernel_paths},
                        {"libc", probe.libc},
                        {"client_requests", probe.client_requests},
                        {"under_valgrind", probe.under_valgrind}});
}

SimProbe read_sim_probe(const std::string& path) {
  const json j = read_json(path);
  Fields f(j, "", path);
  SimProbe p;
  p.kernel_path = f.string("kernel_path", "", true);
  p.kernel_paths = strings(f, "kernel_paths", path);
  p.libc = f.string("libc", "", true);
  p.client_requests = f.boolean("client_requests", false);
  p.under_valgrind = f.boolean("under_valgrind", false);
  f.done();
  return p;
}

}  // namespace kvbench
