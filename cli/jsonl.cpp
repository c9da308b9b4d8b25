// sbsh exec --jsonl: see jsonl.h. Every line is written and flushed at once, so a reader of
// the pipe sees each event as it happens.
#include "cli/jsonl.h"

#include <algorithm>
#include <cstdio>

#include "client/json.h"
#include "ipc/text.h"

namespace sbsh::cli {

namespace {

void write_line(const client::json_value& j) {
  std::string line = client::dump_json(j) + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

std::string_view stream_name(client::stream which) { return which == client::stream::err ? "stderr" : "stdout"; }

}  // namespace

jsonl_writer::jsonl_writer(std::string_view session, size_t output_limit)
    : session_(session.empty() ? "default" : session), streams_{stream_state(output_limit), stream_state(output_limit)} {}

void jsonl_writer::started(const client::exec_start& s) {
  if (started_) return;
  started_ = true;
  client::json_value j;
  j["type"] = "started";
  j["session"] = session_;
  j["id"] = client::command_ref(s.command_id);
  j["generation"] = s.generation;
  j["started_at"] = s.started_at_ms > 0 ? client::json_value(client::rfc3339_ms(s.started_at_ms)) : nullptr;
  write_line(j);
}

void jsonl_writer::chunk(client::stream which, std::string_view data) {
  if (!started_) {
    // Output before "started" only comes from an sbshd that does not say when a command
    // starts: say it here, without what it did not tell.
    started_ = true;
    client::json_value j;
    j["type"] = "started";
    j["session"] = session_;
    j["id"] = nullptr;
    j["generation"] = nullptr;
    j["started_at"] = nullptr;
    write_line(j);
  }
  auto& st = streams_[which == client::stream::err ? 1 : 0];
  st.kept_part.add(data);
  std::string joined;
  if (!st.carry.empty()) {
    joined = st.carry + std::string(data);
    data = joined;
  }
  size_t tail = ipc::utf8_incomplete_tail(data);
  std::string carry(data.substr(data.size() - tail));
  emit(which, data.substr(0, data.size() - tail));
  st.carry = std::move(carry);
}

void jsonl_writer::emit(client::stream which, std::string_view bytes) {
  if (bytes.empty()) return;
  client::json_value j;
  j["type"] = stream_name(which);
  if (ipc::valid_utf8(bytes)) j["data"] = bytes;
  else j["data_base64"] = client::base64(bytes);
  write_line(j);
}

void jsonl_writer::finished(std::string_view command, client::exec_result& r) {
  for (auto which : {client::stream::out, client::stream::err}) {
    auto& st = streams_[which == client::stream::err ? 1 : 0];
    emit(which, st.carry);  // never a whole character, so never valid UTF-8: in base64
    st.carry.clear();
  }
  uint64_t omitted[2];
  for (int i = 0; i < 2; ++i) omitted[i] = streams_[i].kept_part.finish();
  r.stdout_data = std::move(streams_[0].kept);
  r.stderr_data = std::move(streams_[1].kept);
  r.stdout_omitted_bytes = omitted[0];
  r.stderr_omitted_bytes = omitted[1];
  r.stdout_truncated = omitted[0] > 0;
  r.stderr_truncated = omitted[1] > 0;
  r.stdout_bytes = std::max<uint64_t>(r.stdout_bytes, r.stdout_data.size() + omitted[0]);
  r.stderr_bytes = std::max<uint64_t>(r.stderr_bytes, r.stderr_data.size() + omitted[1]);
  client::json_value j;
  j["type"] = r.running ? "detached" : "finished";
  client::add_exec_result(j, session_, command, r);
  write_line(j);
}

}  // namespace sbsh::cli
