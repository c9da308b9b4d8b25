// The JSON form of each record (client/json_form.h): the helpers its rules use, the overrides'
// computed members, and json_of for each record, as client/json.h declares it.
#include "client/json_form.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/text.h"

namespace sbsh::client {

namespace json_detail {

// A name or path at `key`. A file name is bytes, and JSON text cannot hold those that are not
// UTF-8: such a name is there with U+FFFD in their place and, beside it at KEY_base64, its
// exact bytes, as stdout_base64 goes with stdout, so that a reader can name the file again.
// (The names that sbshd sends with their exact bytes, at NAME_bytes beside NAME, use it: a
// file entry's path and target, a session's cwd, root and snapshot, a kept copy's path; the
// others reach the client as UTF-8 already.)
void put_name(json_value& o, const std::string& key, std::string_view name) {
  bool valid = true;
  std::string text = utf8_repair(name, &valid);
  o[key] = std::move(text);
  if (!valid) o[key + "_base64"] = base64(name);
}

// A list of names at `key`, each as put_name() puts one; when any is not UTF-8, KEY_base64
// beside it holds each one's exact bytes (null for those that are UTF-8).
void put_names(json_value& o, const std::string& key, const std::vector<std::string>& names) {
  json_value texts = json_value::array(), exact = json_value::array();
  bool any = false;
  for (const auto& n : names) {
    bool valid = true;
    texts.push_back(utf8_repair(n, &valid));
    exact.push_back(valid ? json_value(nullptr) : json_value(base64(n)));
    any = any || !valid;
  }
  o[key] = std::move(texts);
  if (any) o[key + "_base64"] = std::move(exact);
}

void put_name_schema(json_value& props, const std::string& key) {
  props[key] = {{"type", "string"}};
  props[key + "_base64"] =
      {{"type", "string"},
       {"description",
        fmt::format(
            "only when {} is not valid UTF-8 (it then has U+FFFD in place of those bytes): its exact bytes, in base64",
            key)}};
}

void describe(json_value& schema, std::span<const json_doc> docs, std::string_view prefix) {
  auto props = schema.find("properties");
  if (props == schema.end()) return;
  for (auto& [key, value] : props->items()) {
    std::string name = fmt::format("{}{}", prefix, key);
    for (const auto& d : docs) {
      if (d.key != name) continue;
      if (value.contains("description") || !value.contains("items")) {
        value["description"] = d.text;
      } else {
        json_value v = json_value::object();
        for (auto& [k, x] : value.items()) {
          if (k == "items") v["description"] = d.text;
          v[k] = std::move(x);
        }
        value = std::move(v);
      }
    }
    json_value* inner = value.contains("items") ? &value["items"] : &value;
    if (inner->is_object()) describe(*inner, docs, name + ".");
  }
}

json_value reorder(json_value o, std::span<const std::string_view> order) {
  json_value out = json_value::object();
  auto move = [&](const std::string& key) {
    auto it = o.find(key);
    if (it == o.end()) return;
    out[key] = std::move(*it);
    o.erase(it);
  };
  for (auto k : order) {
    move(std::string(k));
    move(std::string(k) + "_base64");
  }
  for (auto& [key, value] : o.items()) out[key] = std::move(value);
  return out;
}

}  // namespace json_detail

using json_detail::put_name;

}  // namespace sbsh::client

namespace sbsh::ipc {

using client::exec_result;
using client::file_lines;

std::string schema_of<exec_result>::next_offset(const exec_result& r) {
  return fmt::format("{}:{}", r.stdout_bytes, r.stderr_bytes);
}
std::string schema_of<exec_result>::stdout_text(const exec_result& r) {
  return client::utf8_repair(r.stdout_data, nullptr);
}
std::string schema_of<exec_result>::stderr_text(const exec_result& r) {
  return client::utf8_repair(r.stderr_data, nullptr);
}
// The exact bytes, only when they are not UTF-8.
std::optional<std::string> schema_of<exec_result>::stdout_base64(const exec_result& r) {
  if (ipc::valid_utf8(r.stdout_data)) return std::nullopt;
  return client::base64(r.stdout_data);
}
std::optional<std::string> schema_of<exec_result>::stderr_base64(const exec_result& r) {
  if (ipc::valid_utf8(r.stderr_data)) return std::nullopt;
  return client::base64(r.stderr_data);
}

std::string schema_of<file_lines>::content(const file_lines& l) {
  return ipc::valid_utf8(l.content) ? l.content : client::base64(l.content);
}
std::string schema_of<file_lines>::encoding(const file_lines& l) {
  return ipc::valid_utf8(l.content) ? "utf-8" : "base64";
}

}  // namespace sbsh::ipc

namespace sbsh::client {

namespace {

// What the kernel holds a session to: its Landlock rules besides the system's, its
// namespaces and its limits; the cgroup's limits (0: none) and its directory (null: none).
json_value confinement_json(const session_spec& def) {
  json_value c;
  c["landlock"] = def.confine;
  c["landlock_abi"] = def.landlock_abi;
  json_value rules = json_value::array();
  auto rule = [&rules](std::string_view path, std::string_view access) {
    json_value r;
    put_name(r, "path", path);
    r["access"] = access;
    rules.push_back(std::move(r));
  };
  if (def.confine) {
    rule(def.root.empty() ? def.cwd : def.root, "read-write");
    rule("$TMPDIR", "read-write");
    for (const auto& p : def.allow_write) rule(p, "read-write");
    for (const auto& p : def.allow_read) rule(p, "read-execute");
    for (const auto& p : def.read_only) rule(p, "read-only");
  }
  c["rules"] = std::move(rules);
  std::vector<std::string> ns;
  if (def.confine) ns.emplace_back("pid");
  if (def.no_network) ns.emplace_back("net");
  c["namespaces"] = ns;
  c["limits"] = def.limits;
  c["memory_max"] = def.memory_max;
  c["pids_max"] = def.pids_max;
  c["cpu_millis"] = def.cpu_millis;
  c["cgroup"] = text_or_null(def.cgroup);
  return c;
}

}  // namespace

void json_form<session_spec>::finish(json_value& o, const session_spec& def) {
  if (def.snapshot.empty()) {
    for (const char* k : {"snapshot", "snapshot_base64", "ignore", "no_default_ignores", "gitignore",
                          "keep_copy_on_failure", "special_skipped"})
      o.erase(k);
  } else {
    o["ignore_rules"] = ignore_rules(def);
  }
  if (def.setup.empty())
    for (const char* k : {"setup", "setup_keys", "setup_keys_base64", "sbsh_env"}) o.erase(k);
  bool cgroup_limits = def.memory_max != 0 || def.pids_max != 0 || def.cpu_millis != 0;
  if (def.confine || def.no_network || cgroup_limits || !def.cgroup.empty()) o["confinement"] = confinement_json(def);
}

void json_form<session_spec>::finish_schema(json_value& props) {
  auto array_of = [](json_value items) { return json_value{{"type", "array"}, {"items", std::move(items)}}; };
  props["ignore_rules"] = array_of({{"type", "string"}});
  json_value rule = json_value::object();
  json_detail::put_name_schema(rule, "path");
  rule["access"] = {{"type", "string"}, {"enum", {"read-write", "read-execute", "read-only"}}};
  json_value c{{"landlock", {{"type", "boolean"}}},
               {"landlock_abi", {{"type", "integer"}}},
               {"rules",
                array_of(
                    {{"type", "object"}, {"required", json_value::array({"path", "access"})}, {"properties", rule}})},
               {"namespaces", array_of({{"type", "string"}})},
               {"limits", array_of({{"type", "string"}})},
               {"memory_max", {{"type", "integer"}}},
               {"pids_max", {{"type", "integer"}}},
               {"cpu_millis", {{"type", "integer"}}},
               {"cgroup", {{"type", json_value::array({"string", "null"})}}}};
  json_value required = json_value::array();
  for (const auto& [key, value] : c.items()) required.push_back(key);
  props["confinement"] = {{"type", "object"}, {"required", std::move(required)}, {"properties", std::move(c)}};
}

void json_form<file_entry>::finish(json_value& o, const file_entry& e) {
  if (e.type == "symlink") return;
  o.erase("target");
  o.erase("target_base64");
}

json_value json_of(const session_status& s) { return json_form_of(s); }
json_value json_of(const session_detail& d) { return json_form_of(d); }
json_value json_of(const proc_info& p) { return json_form_of(p); }
json_value json_of(const command_info& c) { return json_form_of(c); }
json_value json_of(const daemon_status& st) { return json_form_of(st); }
json_value json_of(const file_entry& e) { return json_form_of(e); }
json_value json_of(const file_search_result& r) { return json_form_of(r); }
json_value json_of(const environment_info& e) { return json_form_of(e); }

namespace {

// The form of r after `path`, as json_schema_at_path describes it.
template <typename T>
json_value at_path(std::string_view path, const T& r) {
  json_value o;
  put_name(o, "path", path);
  json_value rest = json_form_of(r);
  for (auto& [key, value] : rest.items()) o[key] = std::move(value);
  return o;
}

}  // namespace

json_value json_of(std::string_view path, const file_edit_result& r) { return at_path(path, r); }
json_value json_of(std::string_view path, const file_lines& l) { return at_path(path, l); }
json_value json_of(std::string_view path, const file_written& w) { return at_path(path, w); }

void add_exec_result(json_value& j, std::string_view session, std::string_view command, const exec_result& r) {
  j["session"] = session.empty() ? "default" : session;
  j["command"] = command;
  json_value rest = json_form_of(r);
  for (auto& [key, value] : rest.items()) j[key] = std::move(value);
}

json_value exec_result_schema(std::span<const json_doc> docs) {
  json_value props{{"session", {{"type", "string"}}}, {"command", {{"type", "string"}}}};
  std::apply([&](const auto&... f) { (json_detail::put_field_schema<exec_result>(props, f), ...); },
             ipc::kTable<exec_result>);
  return json_detail::object_schema<exec_result>(std::move(props), docs);
}

void json_form<file_lines>::finish_schema(json_value& props) { props["encoding"]["enum"] = {"utf-8", "base64"}; }

json_value json_of(const std::vector<kept_copy>& v, bool sized) {
  json_value a = json_value::array();
  for (const auto& k : v) {
    json_value o = json_form_of(k);
    if (!sized) o.erase("size_bytes");
    a.push_back(std::move(o));
  }
  return a;
}

}  // namespace sbsh::client
