// A minimal JSON reader for checking the CLI's --json output in tests.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sbsh::test {

struct json {
  enum kind_t { null, boolean, number, string, array, object } kind = null;
  bool b = false;
  double n = 0;
  std::string s;
  std::vector<json> a;
  std::map<std::string, json> o;

  const json& operator[](const std::string& k) const {
    static const json missing;
    auto it = o.find(k);
    return it == o.end() ? missing : it->second;
  }
  [[nodiscard]] bool has(const std::string& k) const { return o.count(k) != 0; }
  [[nodiscard]] bool is_null() const { return kind == null; }
  [[nodiscard]] long long i() const { return static_cast<long long>(n); }

  static json parse(const std::string& text) {
    size_t p = 0;
    json v = value(text, p);
    ws(text, p);
    if (p != text.size()) throw std::runtime_error("trailing text after JSON");
    return v;
  }

 private:
  static void ws(const std::string& t, size_t& p) {
    while (p < t.size() && (t[p] == ' ' || t[p] == '\n' || t[p] == '\t' || t[p] == '\r')) ++p;
  }
  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) { out += static_cast<char>(0xc0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3f)); }
    else if (cp < 0x10000) { out += static_cast<char>(0xe0 | (cp >> 12)); out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)); out += static_cast<char>(0x80 | (cp & 0x3f)); }
    else { out += static_cast<char>(0xf0 | (cp >> 18)); out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f)); out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)); out += static_cast<char>(0x80 | (cp & 0x3f)); }
  }
  static std::string str(const std::string& t, size_t& p) {
    if (t[p] != '"') throw std::runtime_error("expected a string");
    std::string out;
    for (++p; p < t.size() && t[p] != '"'; ++p) {
      if (t[p] != '\\') { out += t[p]; continue; }
      char e = t[++p];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          unsigned cp = static_cast<unsigned>(std::stoul(t.substr(p + 1, 4), nullptr, 16));
          p += 4;
          if (cp >= 0xd800 && cp < 0xdc00 && t.compare(p + 1, 2, "\\u") == 0) {
            unsigned lo = static_cast<unsigned>(std::stoul(t.substr(p + 3, 4), nullptr, 16));
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p += 6;
          }
          append_utf8(out, cp);
          break;
        }
        default: out += e;
      }
    }
    ++p;
    return out;
  }
  static json value(const std::string& t, size_t& p) {
    ws(t, p);
    json v;
    if (p >= t.size()) throw std::runtime_error("unexpected end of JSON");
    char c = t[p];
    if (c == '{') {
      v.kind = object;
      ++p;
      ws(t, p);
      if (t[p] == '}') { ++p; return v; }
      for (;;) {
        ws(t, p);
        std::string k = str(t, p);
        ws(t, p);
        if (t[p++] != ':') throw std::runtime_error("expected ':'");
        v.o[k] = value(t, p);
        ws(t, p);
        if (t[p] == ',') { ++p; continue; }
        if (t[p++] != '}') throw std::runtime_error("expected '}'");
        return v;
      }
    }
    if (c == '[') {
      v.kind = array;
      ++p;
      ws(t, p);
      if (t[p] == ']') { ++p; return v; }
      for (;;) {
        v.a.push_back(value(t, p));
        ws(t, p);
        if (t[p] == ',') { ++p; continue; }
        if (t[p++] != ']') throw std::runtime_error("expected ']'");
        return v;
      }
    }
    if (c == '"') { v.kind = string; v.s = str(t, p); return v; }
    if (t.compare(p, 4, "true") == 0) { v.kind = boolean; v.b = true; p += 4; return v; }
    if (t.compare(p, 5, "false") == 0) { v.kind = boolean; p += 5; return v; }
    if (t.compare(p, 4, "null") == 0) { p += 4; return v; }
    char* end = nullptr;
    v.kind = number;
    v.n = std::strtod(t.c_str() + p, &end);
    if (end == t.c_str() + p) throw std::runtime_error("bad JSON value");
    p = static_cast<size_t>(end - t.c_str());
    return v;
  }
};

}  // namespace sbsh::test
