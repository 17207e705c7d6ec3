// What the program was doing when it failed: a Stage names a piece of long work with the word that joins
// it to "failed" ("while training step 12", "during evaluation at 16384 tokens"); if an exception leaves
// it, the innermost such name is kept for main's one-line error, so an allocation failure says where it
// happened and not only how many bytes.
#pragma once
#include <exception>
#include <string>

namespace poslab {

class Stage {
 public:
  explicit Stage(std::string what) : what_(std::move(what)), unwinding_(std::uncaught_exceptions()) {}
  ~Stage() {
    // Leaving by an exception: the innermost stage is destroyed first, so keep the first name only.
    if (std::uncaught_exceptions() > unwinding_ && failed_stage().empty()) failed_stage() = what_;
  }
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  // The innermost stage an exception left on this thread; empty when none did.
  static std::string& failed_stage() {
    static thread_local std::string stage;
    return stage;
  }

 private:
  std::string what_;
  int unwinding_;
};

}  // namespace poslab
