// connectors/jsonl_codec: telemetry JSONL (contract v1) <-> Record, and the
// alert contract <-> JSON. Round trips for every type, non-finite numbers in
// both spellings, null = absent, unknown fields ignored, and one table line
// per class of bad input.
#include "formats/jsonl_codec.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "formats/json_reader.h"
#include "tests/formats/sample_events.h"

namespace runlens::jsonl {
namespace {

using test::kSampleLines;

Record decode_ok(std::string_view line) {
  Record r;
  std::string why;
  bool ok = decode_record(line, &r, &why);
  CAPTURE(line);
  CAPTURE(why);
  REQUIRE(ok);
  return r;
}

// The presence mask of a contract record's body; 0 for derived rows.
uint32_t present_bits(const Record& r) {
  return std::visit(
      [](const auto& b) -> uint32_t {
        using B = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<B, std::shared_ptr<const RunStart>>) {
          return b->present;
        } else if constexpr (requires { b.present; }) {
          return b.present;
        } else {
          return 0;
        }
      },
      r.body);
}

// Clears presence bit `bit` of a contract record's body.
Record without_field(const Record& r, int bit) {
  Record out = r;
  std::visit(
      [&](auto& b) {
        using B = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<B, std::shared_ptr<const RunStart>>) {
          auto copy = std::make_shared<RunStart>(*b);
          copy->present &= ~(1u << bit);
          b = copy;
        } else if constexpr (requires { b.present; }) {
          b.present &= ~(1u << bit);
        }
      },
      out.body);
  return out;
}

json::Value parse_ok(std::string_view line) {
  json::Value v;
  json::ParseError err;
  REQUIRE(json::parse(line, &v, &err));
  return v;
}

TEST_CASE("jsonl: every sample decodes with every field present and encodes back byte for byte") {
  bool seen[kContractKinds] = {};
  for (std::string_view line : kSampleLines) {
    CAPTURE(line);
    Record r = decode_ok(line);
    REQUIRE(static_cast<int>(r.kind()) < kContractKinds);
    seen[static_cast<int>(r.kind())] = true;
    const BodyInfo& info = body_info(r.kind());
    CHECK(present_bits(r) == (1u << info.field_count) - 1u);
    CHECK(encode_record(r) == line);
    // Encoding appends to what is there.
    std::string out = "prefix:";
    encode_record(r, &out);
    CHECK(out == "prefix:" + std::string(line));
  }
  for (int k = 0; k < kContractKinds; ++k) CHECK_MESSAGE(seen[k], kind_name(static_cast<Kind>(k)));
}

TEST_CASE("jsonl: decoded samples hold the values written") {
  Record rs = decode_ok(kSampleLines[0]);
  CHECK(rs.time_ns == 1700000000000000000);
  CHECK(rs.tenant.str() == "team-a");
  const RunStart& s = rs.run_start();
  CHECK(s.run_id.str() == "run-1");
  CHECK(s.world_size == 4);
  CHECK(s.gpu_peak_flops == 9.89e14);
  CHECK(s.code_commit == "3f2a9c1");
  REQUIRE(s.config.size() == 5u);
  CHECK(s.config[0].first == "lr");
  CHECK(s.config[0].second == Value::of(0.5));
  CHECK(s.config[1].second == Value::of(std::string("adamw")));
  CHECK(s.config[2].second == Value::of(32.0));
  CHECK(s.config[3].second == Value::of(std::string("NaN")));  // a string stays a string
  CHECK(s.config[4].second == Value::of(-0.999));
  REQUIRE(s.ranks.size() == 4u);
  CHECK(s.ranks[1] == RankPlacement{1, Symbol::intern("node-a"), 1});
  CHECK(s.ranks[2] == RankPlacement{2, Symbol::intern("node-b"), -1});
  CHECK(s.ranks[3] == RankPlacement{3, Symbol(), -1});

  Record st = decode_ok(kSampleLines[1]);
  const Step& step = st.as<Step>();
  CHECK(st.tenant.empty());
  CHECK(step.rank == 3);
  CHECK(step.step == 1200);
  CHECK(step.step_ms == 512.25);
  CHECK(step.optimizer_ms == 20.0);
  CHECK(step.mem_peak_bytes == 64424509440);

  Record ck = decode_ok(kSampleLines[7]);
  CHECK(ck.as<Checkpoint>().ok == false);
  CHECK(ck.as<Checkpoint>().has(Checkpoint::F::ok));

  Record r1 = decode_ok(kSampleLines[8]), r2 = decode_ok(kSampleLines[9]);
  const Occurrence& e1 = r1.as<Occurrence>();
  CHECK(e1.message == "lr changed by \"scheduler\"\n\tsee logs \\ here");
  CHECK(e1.old == Value::of(0.5));
  CHECK(e1.new_ == Value::of(std::string("cosine")));
  const Occurrence& e2 = r2.as<Occurrence>();
  CHECK(e2.message == "GPU has fallen off the bus \x01");
  CHECK(e2.old == Value::of(std::string("fast")));
  CHECK(e2.new_ == Value::of(-1.5));
  CHECK(decode_ok(kSampleLines[10]).as<RunEnd>().reason == "NCCL timeout on rank 3 \xe2\x80\x94 node-a \xe2\x9c\x93");
}

TEST_CASE("jsonl: member order does not matter, through either decode_record overload") {
  for (std::string_view line : kSampleLines) {
    CAPTURE(line);
    json::Value obj = parse_ok(line);
    std::reverse(obj.members.begin(), obj.members.end());
    Record r;
    std::string why;
    REQUIRE(decode_record(obj, &r, &why));
    CHECK(encode_record(r) == line);
  }
  // The same for a hand-written line with the envelope last.
  Record r = decode_ok(R"({"step_ms":2,"step":1,"rank":0,"run_id":"r","tenant":"t","time_ns":9,"type":"step"})");
  CHECK(encode_record(r) == R"({"type":"step","time_ns":9,"tenant":"t","run_id":"r","rank":0,"step":1,"step_ms":2})");
}

TEST_CASE("jsonl: NaN and infinities, bare or quoted, decode as non-finite and encode as strings") {
  struct Case {
    const char* token;     // as written in the input
    const char* expected;  // as runlens writes it
  };
  const Case cases[] = {
      {"NaN", "\"NaN\""},
      {"\"NaN\"", "\"NaN\""},
      {"Infinity", "\"Infinity\""},
      {"\"Infinity\"", "\"Infinity\""},
      {"-Infinity", "\"-Infinity\""},
      {"\"-Infinity\"", "\"-Infinity\""},
      {"1e400", "\"Infinity\""},
      {"-1e400", "\"-Infinity\""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.token);
    std::string t = c.token;
    // In an F64 body field.
    Record r = decode_ok(R"({"type":"train","time_ns":5,"run_id":"r","step":1,"loss":)" + t + "}");
    double loss = r.as<Train>().loss;
    CHECK_FALSE(std::isfinite(loss));
    std::string want(c.expected);
    CHECK(std::isnan(loss) == (want == "\"NaN\""));
    if (std::isinf(loss)) CHECK((loss > 0) == (want == "\"Infinity\""));
    CHECK(encode_record(r) == R"({"type":"train","time_ns":5,"run_id":"r","step":1,"loss":)" + want + "}");
    // And what runlens wrote reads back the same.
    Record again = decode_ok(encode_record(r));
    CHECK(std::isnan(again.as<Train>().loss) == std::isnan(loss));
    if (!std::isnan(loss)) CHECK(again.as<Train>().loss == loss);
  }
  // Every F64 field of a gpu sample at once.
  Record g = decode_ok(
      R"({"type":"gpu","time_ns":1,"node":"n","gpu":0,"util_pct":NaN,"temp_c":"NaN","power_w":Infinity,"sm_clock_mhz":"-Infinity"})");
  const Gpu& gpu = g.as<Gpu>();
  CHECK(std::isnan(gpu.util_pct));
  CHECK(std::isnan(gpu.temp_c));
  CHECK(gpu.power_w == std::numeric_limits<double>::infinity());
  CHECK(gpu.sm_clock_mhz == -std::numeric_limits<double>::infinity());
  CHECK(
      encode_record(g) ==
      R"({"type":"gpu","time_ns":1,"node":"n","gpu":0,"util_pct":"NaN","temp_c":"NaN","power_w":"Infinity","sm_clock_mhz":"-Infinity"})");
  // A bare NaN in a number-or-string value is a number.
  Record ev = decode_ok(R"({"type":"event","time_ns":1,"kind":"config_change","old":NaN,"new":-Infinity})");
  CHECK(ev.as<Occurrence>().old.kind == Value::Kind::kNumber);
  CHECK(std::isnan(ev.as<Occurrence>().old.number));
  CHECK(ev.as<Occurrence>().new_.number == -std::numeric_limits<double>::infinity());
  CHECK(encode_record(ev) == R"({"type":"event","time_ns":1,"kind":"config_change","old":"NaN","new":"-Infinity"})");
}

TEST_CASE("jsonl: null means absent, for every optional field of every type") {
  int checked = 0;
  for (std::string_view line : kSampleLines) {
    Record full = decode_ok(line);
    const BodyInfo& info = body_info(full.kind());
    for (int i = 0; i < info.field_count; ++i) {
      std::string name(info.fields[i].name);
      CAPTURE(line);
      CAPTURE(name);
      json::Value obj = parse_ok(line);
      bool replaced = false;
      for (auto& [k, v] : obj.members) {
        if (k == name) v = json::Value(), replaced = true;
      }
      REQUIRE(replaced);
      Record r;
      std::string why;
      bool ok = decode_record(obj, &r, &why);
      if (info.fields[i].required) {
        CHECK_FALSE(ok);
        CHECK(why == "type '" + std::string(info.type_name) + "': missing required field '" + name + "'");
      } else {
        REQUIRE(ok);
        CHECK(present_bits(r) == (present_bits(full) & ~(1u << i)));
        CHECK(encode_record(r) == encode_record(without_field(full, i)));
        CHECK(encode_record(r).find("\"" + name + "\":") == std::string::npos);
        ++checked;
      }
    }
  }
  CHECK(checked >= 100);
  // tenant: null and "" are the default tenant.
  for (const char* tenant : {R"("tenant":null,)", R"("tenant":"",)", ""}) {
    Record r = decode_ok(std::string(R"({"type":"node","time_ns":3,)") + tenant + R"("node":"n"})");
    CHECK(r.tenant.empty());
    CHECK(encode_record(r) == R"({"type":"node","time_ns":3,"node":"n"})");
  }
  // null inside a config object and inside a ranks item is absent too.
  Record rs = decode_ok(
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":{"a":null,"b":1},"ranks":[{"rank":0,"node":null,"gpu":null}]})");
  CHECK(encode_record(rs) ==
        R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":{"b":1},"ranks":[{"rank":0}]})");
}

TEST_CASE("jsonl: absent numbers stay absent, not zero") {
  Record r = decode_ok(R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":0,"step_ms":0})");
  const Step& s = r.as<Step>();
  CHECK(s.has(Step::F::step));  // present with value 0
  CHECK(s.has(Step::F::step_ms));
  CHECK_FALSE(s.has(Step::F::forward_ms));
  CHECK_FALSE(s.has(Step::F::tokens));
  CHECK(encode_record(r) == R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":0,"step_ms":0})");
}

TEST_CASE("jsonl: unknown fields are ignored, whatever their value") {
  for (std::string_view line : kSampleLines) {
    CAPTURE(line);
    std::string with_extra(line);
    // After "type":"...", before everything else; and at the end.
    size_t comma = with_extra.find(',');
    with_extra.insert(comma + 1, R"("zz_future":{"nested":[1,{"x":null}],"n":NaN},"schema_v2_field":"x","n2":-1e400,)");
    with_extra.insert(with_extra.size() - 1, R"(,"trailer":[[],{}],"flag":true,"gone":null)");
    CHECK(encode_record(decode_ok(with_extra)) == line);
  }
}

TEST_CASE("jsonl: numbers in integer fields may be written as whole doubles") {
  struct Case {
    const char* value;
    int64_t expected;
  };
  const Case cases[] = {{"12", 12}, {"12.0", 12}, {"1.2e1", 12}, {"-3e0", -3}, {"0", 0}, {"-0", 0}};
  for (const Case& c : cases) {
    CAPTURE(c.value);
    Record r = decode_ok(std::string(R"({"type":"train","time_ns":1,"run_id":"r","step":)") + c.value + "}");
    CHECK(r.as<Train>().step == c.expected);
  }
  CHECK(decode_ok(R"({"type":"node","time_ns":-9223372036854775808,"node":"n"})").time_ns == INT64_MIN);
  CHECK(decode_ok(R"({"type":"node","time_ns":9223372036854775807,"node":"n"})").time_ns == INT64_MAX);
}

struct Bad {
  std::string line;
  std::string error;  // a substring of the reason
};

void check_bad(const Bad& c) {
  CAPTURE(c.line);
  Record r;
  std::string why;
  bool ok = decode_record(c.line, &r, &why);
  CAPTURE(why);
  CHECK_FALSE(ok);
  CHECK(why.find(c.error) != std::string::npos);
}

// A valid step line with `extra` spliced in after the envelope: later members win.
std::string step_with(const std::string& extra) {
  return R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":1,"step_ms":2,)" + extra + "}";
}
std::string run_start_with(const std::string& extra) {
  return R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,)" + extra + "}";
}
std::string event_with(const std::string& extra) {
  return R"({"type":"event","time_ns":1,"kind":"config_change",)" + extra + "}";
}

TEST_CASE("jsonl: bad lines, one per class, with the reason") {
  const Bad cases[] = {
      // Malformed JSON: the column is 1-based.
      {R"({"type":"step",})", "malformed JSON at column 16: expected a string key in object"},
      {R"({"type":"step","time_ns":1)", "malformed JSON at column 27: unterminated object"},
      {"", "malformed JSON at column 1: unexpected end of input"},
      {"{\"type\":\"step\"\x01}", "malformed JSON at column 15"},
      {R"({"type":"step"} {"type":"step"})", "malformed JSON at column 17: unexpected text after the JSON value"},
      // Not an object.
      {R"([{"type":"step"}])", "expected a JSON object, got array"},
      {R"("step")", "expected a JSON object, got string"},
      {"42", "expected a JSON object, got number"},
      {"null", "expected a JSON object, got null"},
      {"true", "expected a JSON object, got bool"},
      // The type.
      {R"({"time_ns":1,"run_id":"r"})", "missing required field 'type'"},
      {R"({"type":7,"time_ns":1})", "field 'type': expected a string"},
      {R"({"type":["step"],"time_ns":1})", "field 'type': expected a string"},
      {R"({"type":"stepz","time_ns":1})", "unknown type 'stepz'"},
      {R"({"type":"Step","time_ns":1})", "unknown type 'Step'"},
      {R"({"type":"","time_ns":1})", "unknown type ''"},
      // Derived kinds are not telemetry.
      {R"({"type":"alert","time_ns":1})", "unknown type 'alert'"},
      {R"({"type":"step_record","time_ns":1})", "unknown type 'step_record'"},
      {R"({"type":"step_stats","time_ns":1})", "unknown type 'step_stats'"},
      // time_ns.
      {R"({"type":"node","node":"n"})", "missing required field 'time_ns'"},
      {R"({"type":"node","time_ns":null,"node":"n"})", "missing required field 'time_ns'"},
      {R"({"type":"node","time_ns":1.5,"node":"n"})",
       "field 'time_ns': expected an integer, got a fractional or huge number"},
      {R"({"type":"node","time_ns":1e30,"node":"n"})",
       "field 'time_ns': expected an integer, got a fractional or huge number"},
      {R"({"type":"node","time_ns":9223372036854775808,"node":"n"})", "field 'time_ns': expected an integer"},
      {R"({"type":"node","time_ns":NaN,"node":"n"})", "field 'time_ns': expected an integer"},
      {R"({"type":"node","time_ns":"1700000000","node":"n"})", "field 'time_ns': expected an integer, got string"},
      {R"({"type":"node","time_ns":true,"node":"n"})", "field 'time_ns': expected an integer, got bool"},
      // tenant.
      {R"({"type":"node","time_ns":1,"tenant":5,"node":"n"})", "field 'tenant': expected a string, got number"},
      {R"({"type":"node","time_ns":1,"tenant":{},"node":"n"})", "field 'tenant': expected a string, got object"},
      // A number field.
      {step_with(R"("step_ms":"fast")"), "type 'step': field 'step_ms': expected a number, got string"},
      {step_with(R"("step_ms":"1.5")"), "field 'step_ms': expected a number, got string"},
      {step_with(R"("step_ms":"nanx")"), "field 'step_ms': expected a number, got string"},
      {step_with(R"("forward_ms":true)"), "field 'forward_ms': expected a number, got bool"},
      {step_with(R"("comm_ms":[1])"), "field 'comm_ms': expected a number, got array"},
      {step_with(R"("comm_ms":{"v":1})"), "field 'comm_ms': expected a number, got object"},
      // An integer field.
      {step_with(R"("rank":1.5)"), "type 'step': field 'rank': expected an integer, got a fractional or huge number"},
      {step_with(R"("rank":"3")"), "field 'rank': expected an integer, got string"},
      {step_with(R"("rank":3000000000)"), "field 'rank': integer out of range"},
      {step_with(R"("rank":-2147483649)"), "field 'rank': integer out of range"},
      {step_with(R"("step":1e300)"), "field 'step': expected an integer, got a fractional or huge number"},
      {step_with(R"("tokens":NaN)"), "field 'tokens': expected an integer"},
      {step_with(R"("tokens":"Infinity")"), "field 'tokens': expected an integer, got string"},
      {step_with(R"("seq_len":false)"), "field 'seq_len': expected an integer, got bool"},
      // A string field (interned or not).
      {step_with(R"("run_id":5)"), "type 'step': field 'run_id': expected a string, got number"},
      {step_with(R"("dataset_shard":["a"])"), "field 'dataset_shard': expected a string, got array"},
      {run_start_with(R"("code_commit":123)"), "type 'run_start': field 'code_commit': expected a string, got number"},
      {event_with(R"("message":{})"), "type 'event': field 'message': expected a string, got object"},
      // A bool field.
      {R"({"type":"checkpoint","time_ns":1,"run_id":"r","checkpoint_id":"c","ok":"yes"})",
       "type 'checkpoint': field 'ok': expected true or false, got string"},
      {R"({"type":"checkpoint","time_ns":1,"run_id":"r","checkpoint_id":"c","ok":1})",
       "field 'ok': expected true or false, got number"},
      // Missing required fields (one per type; every one is covered by the generated test below).
      {R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":1})",
       "type 'step': missing required field 'step_ms'"},
      {R"({"type":"run_start","time_ns":1,"run_id":"r"})", "type 'run_start': missing required field 'world_size'"},
      {R"({"type":"event","time_ns":1,"run_id":"r"})", "type 'event': missing required field 'kind'"},
      {R"({"type":"gpu","time_ns":1,"node":"n","gpu":null})", "type 'gpu': missing required field 'gpu'"},
      // Bad ranks lists.
      {run_start_with(R"("ranks":5)"), "field 'ranks': expected a list of {rank, node, gpu}, got number"},
      {run_start_with(R"("ranks":{"rank":0})"), "field 'ranks': expected a list of {rank, node, gpu}, got object"},
      {run_start_with(R"("ranks":[1])"), "field 'ranks': item 0: expected an object {rank, node, gpu}"},
      {run_start_with(R"("ranks":[{"rank":0},[]])"), "field 'ranks': item 1: expected an object"},
      {run_start_with(R"("ranks":[{"rank":0},{"node":"n"}])"), "field 'ranks': item 1: missing 'rank'"},
      {run_start_with(R"("ranks":[{"rank":"0"}])"), "field 'ranks': item 0: rank: expected an integer, got string"},
      {run_start_with(R"("ranks":[{"rank":0.5}])"), "field 'ranks': item 0: rank: expected an integer"},
      {run_start_with(R"("ranks":[{"rank":0,"node":7}])"),
       "field 'ranks': item 0: node: expected a string, got number"},
      {run_start_with(R"("ranks":[{"rank":0,"gpu":"0"}])"),
       "field 'ranks': item 0: gpu: expected an integer, got string"},
      {run_start_with(R"("ranks":[{"rank":0,"gpu":1e10}])"), "field 'ranks': item 0: gpu: integer out of range"},
      // Bad config values.
      {run_start_with(R"("config":[1])"),
       "field 'config': expected an object of names to numbers or strings, got array"},
      {run_start_with(R"("config":"lr=1")"),
       "field 'config': expected an object of names to numbers or strings, got string"},
      {run_start_with(R"("config":{"lr":0.1,"layers":[1,2]})"),
       "field 'config': key 'layers': expected a number or a string, got array"},
      {run_start_with(R"("config":{"opt":{"name":"adam"}})"),
       "field 'config': key 'opt': expected a number or a string, got object"},
      // Bad event old/new.
      {event_with(R"("old":[1])"), "type 'event': field 'old': expected a number or a string, got array"},
      {event_with(R"("new":{})"), "type 'event': field 'new': expected a number or a string, got object"},
  };
  for (const Bad& c : cases) check_bad(c);
}

TEST_CASE("jsonl: every required field of every type, when missing, names the field") {
  int checked = 0;
  for (std::string_view line : kSampleLines) {
    Record full = decode_ok(line);
    const BodyInfo& info = body_info(full.kind());
    for (int i = 0; i < info.field_count; ++i) {
      if (!info.fields[i].required) continue;
      check_bad({encode_record(without_field(full, i)), "type '" + std::string(info.type_name) +
                                                            "': missing required field '" +
                                                            std::string(info.fields[i].name) + "'"});
      ++checked;
    }
  }
  CHECK(checked >= 19);  // each required field at least once
}

// A JSON value of the wrong type for each field type.
std::vector<std::pair<std::string, std::string>> wrong_values(FieldType t) {
  switch (t) {
    case FieldType::kI32:
    case FieldType::kI64:
      return {{"\"7\"", "expected an integer"}, {"7.5", "expected an integer"}, {"[]", "expected an integer"}};
    case FieldType::kF64:
      return {{"\"fast\"", "expected a number"}, {"false", "expected a number"}, {"{}", "expected a number"}};
    case FieldType::kBOOL:
      return {{"1", "expected true or false"}, {"\"true\"", "expected true or false"}};
    case FieldType::kSYM:
    case FieldType::kSTR:
      return {{"7", "expected a string"}, {"true", "expected a string"}, {"[\"a\"]", "expected a string"}};
    case FieldType::kCONFIG:
      return {{"[]", "expected an object"}, {"{\"k\":[]}", "key 'k'"}};
    case FieldType::kRANKS:
      return {{"{}", "expected a list"}, {"[7]", "item 0"}};
    case FieldType::kVALUE:
      return {{"[]", "expected a number or a string"}, {"{}", "expected a number or a string"}};
  }
  return {};
}

TEST_CASE("jsonl: every field of every type rejects a value of the wrong type") {
  int checked = 0;
  for (std::string_view line : kSampleLines) {
    Record full = decode_ok(line);
    const BodyInfo& info = body_info(full.kind());
    for (int i = 0; i < info.field_count; ++i) {
      std::string name(info.fields[i].name);
      for (const auto& [value, why] : wrong_values(info.fields[i].type)) {
        json::Value obj = parse_ok(line), bad = parse_ok(value);
        for (auto& [k, v] : obj.members) {
          if (k == name) v = bad;
        }
        Record r;
        std::string error;
        CAPTURE(line);
        CAPTURE(name);
        CAPTURE(value);
        CHECK_FALSE(decode_record(obj, &r, &error));
        CHECK(error.find("type '" + std::string(info.type_name) + "': field '" + name + "': ") == 0);
        CHECK(error.find(why) != std::string::npos);
        ++checked;
      }
    }
  }
  CHECK(checked > 250);
}

// --- alerts -------------------------------------------------------------------------

Alert full_alert() {
  Alert a;
  a.alert_id = "4f2a9c1b3d5e7f80";
  a.kind = "straggler";
  a.severity = Severity::kCritical;
  a.time_ns = 1700000000123456789;
  a.ends_ns = 1700000060123456789;
  a.tenant = Symbol::intern("team-a");
  a.run_id = Symbol::intern("run-1");
  a.step = 1200;
  a.rank = 3;
  a.node = Symbol::intern("node-a");
  a.gpu = 7;
  a.value = 1.75;
  a.threshold = 1.5;
  a.summary = "rank 3 is 1.75x slower than the median \"step\"";
  a.symptom = "slow steps on one rank";
  a.cause = "data loader starved\non node-a";
  a.owner = "data-platform";
  a.recommendation = "raise num_workers — or check the \\\\ share";
  a.evidence = {{"step_ms", 1199, "rank 3: 896 ms vs median 512 ms", {}},
                {"data_wait_ms", std::nullopt, "high data wait", "a1"}};
  a.attrs = {{"median_ms", 512.25}, {"ratio", 1.75}, {"ranks", 8}};
  return a;
}

TEST_CASE("alerts: encode, decode and encode again give the same alert and the same text") {
  std::vector<Alert> alerts;
  alerts.push_back(full_alert());
  Alert minimal;
  minimal.alert_id = "0000000000000001";
  minimal.kind = "nan_loss";
  minimal.time_ns = 5;
  alerts.push_back(minimal);
  for (Severity s : {Severity::kInfo, Severity::kWarning, Severity::kCritical}) {
    Alert a = minimal;
    a.severity = s;
    a.step = 0;  // a zero is still present
    a.value = 0;
    alerts.push_back(a);
  }
  for (const Alert& a : alerts) {
    std::string line;
    encode_alert(a, &line);
    CAPTURE(line);
    Alert back;
    std::string why;
    REQUIRE(decode_alert(line, &back, &why));
    CHECK(back == a);
    std::string again;
    encode_alert(back, &again);
    CHECK(again == line);
    // An alert record encodes as the alert.
    CHECK(encode_record(alert_record(a)) == line);
  }
}

TEST_CASE("alerts: the encoding names every field") {
  std::string line;
  encode_alert(full_alert(), &line);
  CHECK(
      line ==
      R"({"alert_id":"4f2a9c1b3d5e7f80","revision":0,"kind":"straggler","severity":"critical","time_ns":1700000000123456789,)"
      R"("ends_ns":1700000060123456789,"tenant":"team-a","run_id":"run-1","step":1200,"rank":3,"node":"node-a","gpu":7,"value":1.75,"threshold":1.5,)"
      R"("summary":"rank 3 is 1.75x slower than the median \"step\"","symptom":"slow steps on one rank",)"
      R"("cause":"data loader starved\non node-a","owner":"data-platform",)"
      R"("evidence":[{"kind":"step_ms","step":1199,"detail":"rank 3: 896 ms vs median 512 ms"},)"
      R"({"kind":"data_wait_ms","detail":"high data wait","alert_id":"a1"}],)"
      R"("recommendation":"raise num_workers — or check the \\\\ share",)"
      R"("attrs":{"median_ms":512.25,"ratio":1.75,"ranks":8}})");
}

TEST_CASE("alerts: non-finite values are written as strings and read back") {
  Alert a = full_alert();
  a.value = std::numeric_limits<double>::quiet_NaN();
  a.threshold = -std::numeric_limits<double>::infinity();
  a.attrs = {{"ratio", std::numeric_limits<double>::infinity()}};
  std::string line;
  encode_alert(a, &line);
  CHECK(line.find(R"("value":"NaN","threshold":"-Infinity")") != std::string::npos);
  CHECK(line.find(R"("attrs":{"ratio":"Infinity"})") != std::string::npos);
  Alert back;
  std::string why;
  REQUIRE(decode_alert(line, &back, &why));
  REQUIRE(back.value);
  CHECK(std::isnan(*back.value));
  CHECK(back.threshold == -std::numeric_limits<double>::infinity());
  REQUIRE(back.attrs.size() == 1u);
  CHECK(back.attrs[0].second == std::numeric_limits<double>::infinity());
}

TEST_CASE("alerts: contract v2's evaluation locators round trip, and are absent when empty") {
  Alert a;
  a.alert_id = make_evaluation_alert_id("benchmark_regression", "digits-mlp", "v2", "ev-0123", "accuracy");
  a.kind = "benchmark_regression";
  a.time_ns = 1767225600000000000;
  a.model_id = "digits-mlp";
  a.model_version = "v2";
  a.evaluation_id = "ev-0123";
  a.value = -0.05;
  a.threshold = -0.02;
  a.summary = "digits-mlp:v2 is worse";
  a.attrs = {{"lower", -0.08}, {"upper", -0.03}};
  std::string line;
  encode_alert(a, &line);
  CHECK(line ==
        R"({"alert_id":")" + a.alert_id +
            R"(","revision":0,"kind":"benchmark_regression","severity":"warning","time_ns":1767225600000000000,)"
            R"("model_id":"digits-mlp","model_version":"v2","evaluation_id":"ev-0123","value":-0.05,)"
            R"("threshold":-0.02,"summary":"digits-mlp:v2 is worse","attrs":{"lower":-0.08,"upper":-0.03}})");
  Alert back;
  std::string why;
  REQUIRE(decode_alert(line, &back, &why));
  CHECK(back == a);
  // A training alert has none of them.
  std::string training;
  encode_alert(full_alert(), &training);
  CHECK(training.find("model_id") == std::string::npos);
  CHECK(training.find("evaluation_id") == std::string::npos);
  // Consumers ignore fields they do not know (later revisions of v2 may add more); revision is read.
  REQUIRE(decode_alert(R"({"alert_id":"a","kind":"k","revision":3,"future":{"x":[1]},"model_id":"m"})", &back, &why));
  CHECK(back.model_id == "m");
  CHECK(back.revision == 3);
  // An alert without the field (v1) is revision 0; a revision round trips.
  REQUIRE(decode_alert(R"({"alert_id":"a","kind":"k"})", &back, &why));
  CHECK(back.revision == 0);
  Alert revised = a;
  revised.revision = 7;
  std::string revised_line;
  encode_alert(revised, &revised_line);
  CHECK(revised_line.find(R"(","revision":7,"kind":)") != std::string::npos);
  REQUIRE(decode_alert(revised_line, &back, &why));
  CHECK(back == revised);
  CHECK_FALSE(decode_alert(R"({"alert_id":"a","kind":"k","revision":"1"})", &back, &why));
  CHECK(why.find("field 'revision'") != std::string::npos);
  CHECK_FALSE(decode_alert(R"({"alert_id":"a","kind":"k","evaluation_id":7})", &back, &why));
  CHECK(why.find("field 'evaluation_id'") != std::string::npos);
}

TEST_CASE("alerts: bad alert lines") {
  struct Case {
    std::string line;
    std::string error;
  };
  const Case cases[] = {
      {R"({"alert_id":"a","kind":"k")", "malformed JSON at column 27"},
      {R"(["a"])", "expected an object"},
      {R"({"kind":"k","time_ns":1})", "missing alert_id or kind"},
      {R"({"alert_id":"a","time_ns":1})", "missing alert_id or kind"},
      {R"({"alert_id":"a","kind":"k","step":"x"})", "field 'step': expected an integer"},
      {R"({"alert_id":"a","kind":"k","rank":5000000000})", "field 'rank': integer out of range"},
      {R"({"alert_id":"a","kind":"k","time_ns":1.5})", "field 'time_ns': expected an integer"},
      {R"({"alert_id":"a","kind":"k","value":"high"})", "field 'value': expected a number"},
      {R"({"alert_id":7,"kind":"k"})", "field 'alert_id': expected a string"},
      {R"({"alert_id":"a","kind":"k","summary":null})", "field 'summary': expected a string"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    Alert a;
    std::string why;
    CHECK_FALSE(decode_alert(c.line, &a, &why));
    CAPTURE(why);
    CHECK(why.find(c.error) != std::string::npos);
  }
}

TEST_CASE("jsonl: rank entries' optional gpu_model and node_type round trip, and stay absent when not given") {
  const std::string line =
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":3,"ranks":[{"rank":0,"node":"n0","gpu":0,)"
      R"("gpu_model":"NVIDIA H100 80GB HBM3","node_type":"p5.48xlarge"},{"rank":1,"node":"n1","gpu":0,)"
      R"("gpu_model":"NVIDIA A100-SXM4-40GB"},{"rank":2,"node_type":"a2-highgpu-8g"}]})";
  Record r = decode_ok(line);
  const RunStart& s = r.run_start();
  REQUIRE(s.ranks.size() == 3u);
  CHECK(s.ranks[0].gpu_model.str() == "NVIDIA H100 80GB HBM3");
  CHECK(s.ranks[0].node_type.str() == "p5.48xlarge");
  CHECK(s.ranks[1].gpu_model.str() == "NVIDIA A100-SXM4-40GB");
  CHECK(s.ranks[1].node_type.empty());
  CHECK(s.ranks[2].gpu_model.empty());
  CHECK(s.ranks[2].node_type.str() == "a2-highgpu-8g");
  CHECK(s.ranks[2].node.empty());
  CHECK(s.ranks[2].gpu == -1);
  CHECK(encode_record(r) == line);

  // null is absent; a record without them is written (and hashed) as before.
  Record plain = decode_ok(
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":1,"ranks":[{"rank":0,"node":"n0","gpu":0}]})");
  Record nulls = decode_ok(
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":1,"ranks":[{"rank":0,"node":"n0","gpu":0,"gpu_model":null,"node_type":null}]})");
  CHECK(encode_record(nulls) == encode_record(plain));
  CHECK(encode_record(plain) ==
        R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":1,"ranks":[{"rank":0,"node":"n0","gpu":0}]})");
  CHECK(content_hash(nulls) == content_hash(plain));
  Record modelled = decode_ok(
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":1,"ranks":[{"rank":0,"node":"n0","gpu":0,"gpu_model":"X"}]})");
  CHECK(content_hash(modelled) != content_hash(plain));

  Record bad;
  std::string why;
  CHECK_FALSE(decode_record(
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":1,"ranks":[{"rank":0,"gpu_model":7}]})", &bad,
      &why));
  CHECK(why == "type 'run_start': field 'ranks': item 0: gpu_model: expected a string, got number");
  CHECK_FALSE(decode_record(
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":1,"ranks":[{"rank":0,"node_type":[]}]})", &bad,
      &why));
  CHECK(why == "type 'run_start': field 'ranks': item 0: node_type: expected a string, got array");
}

}  // namespace
}  // namespace runlens::jsonl
