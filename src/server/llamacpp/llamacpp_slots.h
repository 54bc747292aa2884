// What GET /slots reports: llama.cpp's server has a fixed number of slots,
// each running one sequence. tokenmill's engine has max_seqs sequence
// slots but does not pin a request to one, so the server keeps this board:
// each running /completion or /infill choice holds a numbered slot (the
// lowest free one, or the id_slot it asked for) with its settings and how
// far it got. Requests of the other endpoints hold no slot here; /slots
// counts them from the engine's gauges (llamacpp_api.cc).
//
// Thread-safety: every method locks one mutex; a lease is updated by the
// one HTTP worker that answers its request.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tokenmill::server {

struct SlotState {
  int id = 0;
  bool busy = false;
  int64_t id_task = -1;
  nlohmann::json params;  // generation settings while busy
  int64_t n_decoded = 0;
  int64_t n_remain = -1;  // tokens still allowed (-1: unknown)
  bool has_new_line = false;
  std::string tenant;  // whose request holds it (api_keys.h): /slots shows a tenant only its own
};

class SlotBoard {
 public:
  // A held slot, released when the lease is destroyed. An empty lease
  // (id() == -1) holds none: every slot was taken.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();

    int id() const { return id_; }
    // One more generated token, with its text.
    void on_token(bool has_new_line);

   private:
    friend class SlotBoard;
    Lease(SlotBoard* board, int id) : board_(board), id_(id) {}
    void release();

    SlotBoard* board_ = nullptr;
    int id_ = -1;
  };

  // Sizes the board (the engine's max_seqs); slots beyond a smaller size
  // are dropped, so call it before any lease is taken.
  void set_total(int total);
  int total() const;

  // The slot `wanted` when it is free, else the lowest free one, held for
  // `tenant`'s request.
  Lease acquire(int wanted, nlohmann::json params, int64_t n_remain, std::string tenant = {});

  std::vector<SlotState> snapshot() const;
  // What `tenant` may see: its own slots whole, another tenant's busy slot
  // as busy with nothing else (no settings, task or progress: params
  // null). `sees_all`: every slot whole (admin keys; servers without keys).
  std::vector<SlotState> snapshot_for(const std::string& tenant, bool sees_all) const;
  int num_busy() const;

 private:
  mutable std::mutex mutex_;
  std::vector<SlotState> slots_;
  int64_t next_task_ = 0;
};

}  // namespace tokenmill::server
