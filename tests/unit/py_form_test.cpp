// python/gen/py_form.h: a record's Python dataclass and its converter from the JSON
// form follow from its field table alone. The records here are declared only in this test,
// as ipc/messages.h declares the protocol's, and get their Python text from the generator
// with no other code; an override (py_form<T>) changes only what it names.
#include <gtest/gtest.h>

#include "python/gen/py_form.h"

namespace sbsh::client::py_form_tests {

struct dummy_part {
  std::string label;
  uint64_t count = 0;
};

struct dummy_record {
  std::string name;
  std::string path;  // with its exact bytes
  std::vector<std::string> keys;
  int64_t seen_at_ms = 0;  // a time
  uint64_t uptime_ms = 0;  // a duration: not a time
  uint64_t limit = 0;      // omitted when 0: may be null
  int64_t pid = 0;         // nil when 0
  bool quiet = false;
  std::optional<int> exit_code;
  dummy_part part;
  std::vector<dummy_part> parts;
};

// The same fields, shown differently on purpose by an override.
struct dummy_renamed {
  std::string text;
  uint64_t bytes = 0;
  int64_t started_at_ms = 0;
  std::string secret;
};

}  // namespace sbsh::client::py_form_tests

namespace sbsh::ipc {

template <>
struct schema_of<client::py_form_tests::dummy_part> {
  static constexpr std::string_view name = "dummy part";
  static constexpr auto fields() {
    using s = client::py_form_tests::dummy_part;
    return std::tuple{field("label", &s::label), field("count", &s::count)};
  }
};

template <>
struct schema_of<client::py_form_tests::dummy_record> {
  static constexpr std::string_view name = "dummy record";
  static constexpr auto fields() {
    using s = client::py_form_tests::dummy_record;
    return std::tuple{field("name", &s::name),
                      field("path", &s::path),
                      bytes_of("path_bytes", &s::path, "its exact bytes"),
                      field("keys", &s::keys),
                      field("seen_at_ms", &s::seen_at_ms),
                      field("uptime_ms", &s::uptime_ms),
                      field("limit", &s::limit, kOmitEmpty),
                      field("pid", &s::pid, kNilIfZero),
                      field("quiet", &s::quiet, kOmitEmpty),
                      field("exit_code", &s::exit_code),
                      field("part", &s::part),
                      field("parts", &s::parts)};
  }
};

template <>
struct schema_of<client::py_form_tests::dummy_renamed> {
  static constexpr std::string_view name = "dummy renamed";
  static constexpr auto fields() {
    using s = client::py_form_tests::dummy_renamed;
    return std::tuple{field("text", &s::text), bytes_of("text_bytes", &s::text, "its exact bytes"),
                      field("bytes", &s::bytes), field("started_at_ms", &s::started_at_ms),
                      field("secret", &s::secret)};
  }
};

}  // namespace sbsh::ipc

namespace sbsh::client::py {

template <>
struct py_form<py_form_tests::dummy_renamed> {
  static constexpr std::string_view cls = "Renamed";
  static constexpr std::string_view doc = "A record shown differently.\n\nOn two lines.";
  static constexpr py_rule rules[] = {{"text", py_as::plain_text},
                                      {"text_bytes", py_as::exact_bytes, "data"},
                                      {"bytes", py_as::rename, "size"},
                                      {"started_at_ms", py_as::seconds},
                                      {"secret", py_as::omit}};
  static constexpr std::string_view order[] = {"size"};
  static constexpr size_t positional = 1;
};

}  // namespace sbsh::client::py

namespace sbsh::client::py_form_tests {

using py::python_converter;
using py::python_dataclass;

TEST(PyForm, ADummyRecordGetsItsDataclassFromItsTableAlone) {
  EXPECT_EQ(python_dataclass<dummy_record>(),
            "@dataclass(frozen=True, slots=True)\n"
            "class DummyRecord:\n"
            "    name: str\n"
            "    path: str\n"
            "    keys: Tuple[str, ...]\n"
            "    seen_at: Optional[float]\n"
            "    uptime_ms: int\n"
            "    limit: Optional[int]\n"
            "    pid: Optional[int]\n"
            "    quiet: bool\n"
            "    exit_code: Optional[int]\n"
            "    part: DummyPart\n"
            "    parts: Tuple[DummyPart, ...]\n");
  EXPECT_EQ(python_dataclass<dummy_part>(),
            "@dataclass(frozen=True, slots=True)\n"
            "class DummyPart:\n"
            "    label: str\n"
            "    count: int\n");
}

TEST(PyForm, ADummyRecordGetsItsConverterFromTheJsonForm) {
  EXPECT_EQ(python_converter<dummy_record>(),
            "def dummy_record(d: Mapping[str, Any]) -> DummyRecord:\n"
            "    return DummyRecord(\n"
            "        name=str(d.get(\"name\") or \"\"),\n"
            "        path=_name(d, \"path\") or \"\",\n"
            "        keys=_strs(d.get(\"keys\")),\n"
            "        seen_at=unix_time(d.get(\"seen_at\")),\n"
            "        uptime_ms=int(d.get(\"uptime_ms\") or 0),\n"
            "        limit=_opt_int(d.get(\"limit\")),\n"
            "        pid=_opt_int(d.get(\"pid\")),\n"
            "        quiet=bool(d.get(\"quiet\")),\n"
            "        exit_code=_opt_int(d.get(\"exit_code\")),\n"
            "        part=dummy_part(d.get(\"part\") or {}),\n"
            "        parts=tuple(dummy_part(x) for x in sequence_of(d.get(\"parts\"))),\n"
            "    )\n");
}

TEST(PyForm, AnOverrideChangesOnlyWhatItNames) {
  EXPECT_EQ(python_dataclass<dummy_renamed>(),
            "@dataclass(frozen=True, slots=True)\n"
            "class Renamed:\n"
            "    \"\"\"A record shown differently.\n"
            "\n"
            "    On two lines.\"\"\"\n"
            "    size: int\n"
            "    text: str = \"\"\n"
            "    data: bytes = b\"\"\n"
            "    started_at: float = 0.0\n");
  EXPECT_EQ(python_converter<dummy_renamed>(),
            "def renamed(d: Mapping[str, Any]) -> Renamed:\n"
            "    return Renamed(\n"
            "        size=int(d.get(\"bytes\") or 0),\n"
            "        text=str(d.get(\"text\") or \"\"),\n"
            "        data=_exact(d, \"text\"),\n"
            "        started_at=unix_time(d.get(\"started_at\")) or 0.0,\n"
            "    )\n");
}

}  // namespace sbsh::client::py_form_tests
