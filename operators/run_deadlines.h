// Deadlines of per-run work (a step waiting for its ranks, an incident
// waiting for the steps after it), fired in event-time order. Ties break on
// the run's text and then the key, never on arrival or symbol ids, so the
// firing order is part of the deterministic output.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "schema/symbol.h"

namespace runlens::ops {

template <class Key>  // ordered by operator<
class RunDeadlines {
 public:
  void schedule(int64_t deadline, Symbol run, Key key) { heap_.push(Entry{deadline, run, std::move(key)}); }

  // Calls fire(deadline, run, key) for every deadline <= t, earliest first.
  // A deadline whose work is already done is the caller's to ignore.
  template <class Fire>
  void fire_until(int64_t t, Fire&& fire) {
    while (!heap_.empty() && heap_.top().deadline <= t) {
      Entry e = heap_.top();
      heap_.pop();
      fire(e.deadline, e.run, e.key);
    }
  }

 private:
  struct Entry {
    int64_t deadline;
    Symbol run;
    Key key;
  };
  struct After {  // a min-heap
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.deadline != b.deadline) return a.deadline > b.deadline;
      if (int c = Symbol::compare(a.run, b.run)) return c > 0;
      return b.key < a.key;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, After> heap_;
};

}  // namespace runlens::ops
