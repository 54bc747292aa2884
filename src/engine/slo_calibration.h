// Seeds SLO-aware admission's step-cost model before the first client
// arrives. Without it the gate has nothing to forecast with and admits
// everything until it has measured both kinds of step: a restart under
// load, exactly when the gate must hold, would queue every arrival and
// miss every target (a cold server admitted 32 of 40 burst requests, 31
// of them over a 500 ms TTFT target).
//
// The calibration runs real steps of the loaded model through the engine:
// one prompt of a prefill chunk, a batch of short prompts decoding
// together (decode steps at a second batch size, for the line's slope),
// and a prompt of half a chunk: at least three prefill steps and a dozen
// decode steps, past the model's kMinSteps of each. The steps
// are what SloAdmission observes anyway; the requests' own counts are
// then cleared from the metrics, so clients never see them. Cost: one
// chunk of prefill and about ten decode steps, once, at start-up.
#pragma once

namespace tokenmill::engine {

class Engine;

// Runs the calibration on `engine` (started, no client requests yet) and
// waits for it. Throws Error when a calibration request fails (the model
// cannot run at all).
void calibrate_slo_costs(Engine& engine);

}  // namespace tokenmill::engine
