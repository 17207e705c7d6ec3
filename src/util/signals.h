// SIGINT/SIGTERM handling for long work: the first signal asks the loop to stop at the next
// step boundary (it checkpoints and exits cleanly); a second one, a second or more later, exits at once
// (within the second it is the same stop arriving twice: from the terminal and from compare).
#pragma once

#include <string>

namespace poslab {

void install_stop_handlers();
// From now on a signal exits at once with status 130, printing `message` on stderr: for work with
// nothing to checkpoint and nothing half-written if it stops (the evaluation after training).
void exit_on_stop(const std::string& message);
void stop_at_steps();  // undoes exit_on_stop: a signal asks the loop to stop at its next step again
bool stop_requested();
void request_stop();  // what the handler does; tests call it directly
void clear_stop();

// Set by compare in the environment of the processes it starts (its pid): they take SIGTERM, a stop,
// when compare's process ends first (kill -9, the OOM killer), instead of training on unwatched.
constexpr const char* kParentVariable = "POSLAB_COMPARE_PID";
// At start-up: where kParentVariable is set, asks for SIGTERM on the parent's end, and ends at once
// when the parent it names is gone already.
void stop_with_parent();

}  // namespace poslab
