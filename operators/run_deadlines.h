// Deadlines of per-run work (a step waiting for its ranks, an incident
// waiting for the steps after it), fired in event-time order. Ties break on
// the run's text and then the key, never on arrival or symbol ids, so the
// firing order is part of the deterministic output.
//
// The pending deadlines are state (docs/state.md): fields() snapshots the
// heap as it is, so a restored instance fires the same deadlines in the same
// order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/state/codec.h"
#include "schema/symbol.h"

namespace runlens::ops {

template <class Key>  // ordered by operator<
class RunDeadlines {
 public:
  void schedule(int64_t deadline, Symbol run, Key key) {
    heap_.push_back(Entry{deadline, run, std::move(key)});
    std::push_heap(heap_.begin(), heap_.end(), After());
  }

  // Calls fire(deadline, run, key) for every deadline <= t, earliest first.
  // A deadline whose work is already done is the caller's to ignore.
  template <class Fire>
  void fire_until(int64_t t, Fire&& fire) {
    while (!heap_.empty() && heap_.front().deadline <= t) {
      std::pop_heap(heap_.begin(), heap_.end(), After());
      Entry e = std::move(heap_.back());
      heap_.pop_back();
      fire(e.deadline, e.run, e.key);
    }
  }

  size_t size() const { return heap_.size(); }

  template <class Io>
  void fields(Io& io) {
    io(heap_);
    if constexpr (runtime::state::kReading<Io>) {
      if (!std::is_heap(heap_.begin(), heap_.end(), After())) io.fail("the deadlines are not a heap");
    }
  }

  struct Entry {
    int64_t deadline;
    Symbol run;
    Key key;
    template <class Io>
    void fields(Io& io) {
      io(deadline, run, key);
    }
  };

 private:
  struct After {  // a min-heap
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.deadline != b.deadline) return a.deadline > b.deadline;
      if (int c = Symbol::compare(a.run, b.run)) return c > 0;
      return b.key < a.key;
    }
  };
  std::vector<Entry> heap_;  // a heap by After
};

}  // namespace runlens::ops
