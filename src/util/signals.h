// SIGINT/SIGTERM handling for long work: the first signal asks the loop to stop at the next
// step boundary (it checkpoints and exits cleanly); a second one exits at once.
#pragma once

namespace poslab {

void install_stop_handlers();
bool stop_requested();
void request_stop();  // what the handler does; tests call it directly
void clear_stop();

}  // namespace poslab
