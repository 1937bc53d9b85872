#pragma once
// The fuzz targets' entry functions: each feeds one input to one reader of user files. A
// UserError is the right answer to a bad input and is returned as its message; anything else
// (InternalError, a SYNC_CHECK failure, another exception, a crash) escapes and is a bug.
// Called by the libFuzzer programs (fuzz_main.cpp, clang) and by the replay test of the
// corpora (replay_test.cpp, the ordinary build).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace syncopate::fuzz {

// What an entry function returns: "" if the input was accepted, else the UserError's message.
using Outcome = std::string;

// A scenario file; lines after a line "### --set" are overrides (key=value), one per line.
Outcome scenario(std::span<const uint8_t> input);
// A platform recipe (backends/sim/platform); lines after "### overrides" are key=value.
Outcome platform_recipe(std::span<const uint8_t> input);
// A SimGrid XML platform: checked by check_simgrid_xml; what it accepts is then loaded by
// SimGrid in a child process, and a child that dies of a signal is a bug the check missed.
Outcome simgrid_xml(std::span<const uint8_t> input);
// An IDX file, plain or gzip.
Outcome idx(std::span<const uint8_t> input);
// A CSV table; the first line names the target columns (comma-separated), the rest is the file.
Outcome csv(std::span<const uint8_t> input);

// A run's checkpoints (core/train/checkpoint.hpp), of the embedded scenario at one worker, read
// as `run --resume` reads them. The first byte says what the rest is, modulo 4: 0, a worker's
// payload, which the target frames with the scenario's hash and the right CRC-32 as worker 0's
// file; 1, worker 0's file; 2, payloads separated by "SYNC|REC", framed so and put into a
// checkpoint set file; 3, the set file.
Outcome checkpoint(std::span<const uint8_t> input);

// The entry function of a target by its name (the corpus folder's): scenario, platform_recipe,
// simgrid_xml, idx, csv, checkpoint. Null for an unknown name.
using Entry = Outcome (*)(std::span<const uint8_t>);
Entry entry_of(std::string_view target);

}  // namespace syncopate::fuzz
