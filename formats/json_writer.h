// Appends JSON to a string. Numbers are written in their shortest
// round-trip form; non-finite numbers as the strings "NaN", "Infinity" and
// "-Infinity", so that every line runlens writes is strict JSON (jq reads
// it) and runlens reads it back to the same value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace runlens::json {

void append_escaped(std::string* out, std::string_view s);  // with quotes
void append_number(std::string* out, double v);
void append_int(std::string* out, int64_t v);

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  Writer& begin_object() {
    sep();
    out_->push_back('{');
    first_ = true;
    return *this;
  }
  Writer& end_object() {
    out_->push_back('}');
    first_ = false;
    return *this;
  }
  Writer& begin_array() {
    sep();
    out_->push_back('[');
    first_ = true;
    return *this;
  }
  Writer& end_array() {
    out_->push_back(']');
    first_ = false;
    return *this;
  }
  Writer& key(std::string_view k) {
    sep();
    append_escaped(out_, k);
    out_->push_back(':');
    after_key_ = true;
    return *this;
  }
  Writer& str(std::string_view v) {
    sep();
    append_escaped(out_, v);
    return *this;
  }
  Writer& num(double v) {
    sep();
    append_number(out_, v);
    return *this;
  }
  Writer& integer(int64_t v) {
    sep();
    append_int(out_, v);
    return *this;
  }
  Writer& boolean(bool v) {
    sep();
    out_->append(v ? "true" : "false");
    return *this;
  }
  Writer& null() {
    sep();
    out_->append("null");
    return *this;
  }

 private:
  void sep() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_) out_->push_back(',');
    first_ = false;
  }
  std::string* out_;
  bool first_ = true;
  bool after_key_ = false;
};

}  // namespace runlens::json
