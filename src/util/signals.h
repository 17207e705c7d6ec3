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

}  // namespace poslab
