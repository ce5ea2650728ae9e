// A metric of the vocabulary (eval/metric.h) as a suite would declare it, for
// the tests of the aggregator and the gate.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "eval/metric.h"

namespace runlens::eval {

inline MetricSpec metric_spec(const std::string& name, std::vector<std::pair<std::string, std::string>> args = {},
                              std::vector<int64_t> k = {}) {
  MetricSpec m;
  m.name = name;
  m.def = find_metric(name);
  REQUIRE(m.def);
  m.args = std::move(args);
  m.k = std::move(k);
  return m;
}

}  // namespace runlens::eval
