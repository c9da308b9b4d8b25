// sbsh exec --jsonl: the command's life as JSON lines on stdout, each written and flushed as
// it happens (documented in sbsh(1), under exec).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "client/head_tail.h"
#include "sbsh/client.h"

namespace sbsh::cli {

// One line per event: "started" when a shell takes the command; "stdout" and "stderr" with a
// chunk of output each, in "data" when the chunk is UTF-8, else its exact bytes in
// "data_base64"; "finished" with the fields of exec --json. A chunk never ends inside a
// UTF-8 character: an incomplete one waits for the rest, and what is left of one when the
// stream ends goes out alone, in base64.
class jsonl_writer {
 public:
  // `output_limit`: how much of each stream "finished" repeats, as exec --json keeps.
  jsonl_writer(std::string_view session, size_t output_limit);
  // For exec_options::on_started and on_output.
  void started(const client::exec_start& s);
  void chunk(client::stream which, std::string_view data);
  // Ends both streams, puts the output kept into `r` and writes "finished", or "detached"
  // when the command goes on without sbsh (r.running).
  void finished(std::string_view command, client::exec_result& r);

 private:
  struct stream_state {
    explicit stream_state(size_t limit) : kept_part(&kept, limit) {}
    stream_state(const stream_state&) = delete;  // kept_part points into it
    stream_state& operator=(const stream_state&) = delete;
    std::string carry;  // the start of a character whose rest has not arrived
    std::string kept;
    client::head_tail kept_part;  // into kept
  };
  static void emit(client::stream which, std::string_view bytes);
  std::string session_;
  bool started_ = false;
  stream_state streams_[2];
};

}  // namespace sbsh::cli
