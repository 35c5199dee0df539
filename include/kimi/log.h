// kimi/log.h: notes for the user, e.g. "4 of 8 MLA mixers run on the CPU: ..." when a model is placed.
//
// By default a note is written to stderr as "kimi: <note>\n". A program (the CLI, a server, a test) may
// install its own handler to print, collect or silence notes. Thread-safe.
#pragma once

#include <functional>
#include <string_view>

namespace kimi {

using NoteHandler = std::function<void(std::string_view note)>;

// Installs h and returns the previous handler; an empty h restores the default (stderr).
NoteHandler set_note_handler(NoteHandler h);
// Hands one note to the current handler.
void note(std::string_view text);

}  // namespace kimi
