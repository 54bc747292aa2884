// The load of a replica and the three ways to pick one. Pure functions over
// a snapshot of the replicas (taken under the balancer's lock), so that the
// formula and the picks are tested without a network.
//
// Load of replica i, in units of "requests":
//
//   load_i = waiting_i + 0.5 * in_flight_i + 0.5 * tokens_i / mean_tokens
//
//   waiting_i    tokenmill_requests_waiting on the replica's /metrics, as
//                last polled (--poll-ms): requests it has queued, from this
//                router or anyone else.
//   in_flight_i  requests this router sent it that have not ended.
//   tokens_i     the estimated tokens of those requests, each
//                prompt_bytes / 4 + n * max_tokens (route_info.h).
//   mean_tokens  sum(tokens) / sum(in_flight) over all replicas (1 when
//                nothing is in flight): the estimate normalised so that an
//                average request counts 1.
//
// With requests of one size the last two terms add up to in_flight_i; a
// replica holding long prompts or long generations counts more than one
// holding as many short ones. Queued requests count on top, since a
// replica with a queue cannot start a new request at once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "router/hash_ring.h"

namespace tokenmill::router {

struct LoadInputs {
  int64_t waiting = 0;
  int64_t in_flight = 0;
  double tokens = 0;
};

// mean_tokens as above, from every replica's inputs.
double mean_request_tokens(std::span<const LoadInputs> replicas);
double replica_load(const LoadInputs& r, double mean_tokens);

// (1 + slack) * (mean load over the usable replicas) + 1. The +1 lets an
// idle cluster keep affinity: with every load 0 the bound is 1, so one
// request in flight never pushes a key off its replica.
double load_bound(std::span<const double> loads, std::span<const char> usable, double slack);

struct Pick {
  int replica = -1;        // -1: no usable replica
  bool preferred = false;  // affinity: the key's own replica (first usable on the ring)
};

// Affinity with bounded load: walk the ring from `key`; the first usable
// replica whose load is at most the bound wins. One always is (the least
// loaded usable replica is under the mean), so the walk ends.
Pick pick_affinity(const HashRing& ring, uint64_t key, std::span<const double> loads, std::span<const char> usable,
                   double slack);

// The usable replica with the least load; ties go to the first at or after
// `start` (mod size), so an idle cluster is still spread round-robin.
int pick_least_load(std::span<const double> loads, std::span<const char> usable, uint64_t start);

// The (counter mod k)-th of the k usable replicas: an even rotation over
// those up, whichever are down.
int pick_round_robin(std::span<const char> usable, uint64_t counter);

}  // namespace tokenmill::router
