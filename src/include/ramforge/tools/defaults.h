/*
 * Defaults shared by ramforge's programs (`ramforge run`, `ramforge bench`,
 * bench/observer_bench), so that runs started without the option generate
 * from the same input and their tokens and timings can be compared across
 * programs. Compile-time constants only: no function, no dependency.
 */
#ifndef RAMFORGE_DEFAULTS_H
#define RAMFORGE_DEFAULTS_H

/*
 * The prompt of a run when none is given (-p/--prompt): a C string literal,
 * UTF-8, tokenized by the model's own vocab. Short on purpose: the runs
 * measure loading and decoding, not prompt processing.
 */
#define RF_DEFAULT_PROMPT "Hello my name is"

#endif
