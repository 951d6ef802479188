/* atomflash console: a line reader and a command table.
 *
 * Commands register themselves where they are implemented:
 *
 *     static int cmd_bbt(int argc, char **argv) { ... return AF_OK; }
 *     AF_COMMAND(bbt, "bbt", "show the bad-block table", cmd_bbt);
 *
 * The linker gathers every AF_COMMAND into the .af_cmds section, sorted by
 * name (firmware/linker.ld), so `help` lists everything and a new command is
 * a new entry in its own file, never an edit to a central table.
 *
 * A handler gets argv[0] = the command word.  It returns AF_OK, AF_EUSAGE
 * (the console prints "error: usage: <usage>") or AF_EFAIL (the handler has
 * printed its own "error: ..." line). */
#ifndef AF_CONSOLE_H
#define AF_CONSOLE_H

#include <stdint.h>

#define AF_OK 0
#define AF_EUSAGE 1
#define AF_EFAIL 2

#define AF_CONSOLE_LINE_MAX 128
#define AF_CONSOLE_ARGS_MAX 16

typedef int (*af_cmd_fn)(int argc, char **argv);

struct af_cmd {
	const char *name;
	const char *usage;   /* e.g. "nand id|status" */
	const char *help;    /* one line */
	af_cmd_fn fn;
};

#define AF_COMMAND(id, usage_, help_, fn_)                                    \
	__attribute__((used, section(".af_cmd." #id), aligned(4)))           \
	static const struct af_cmd af_cmd_##id = { #id, usage_, help_, fn_ }

/* Console loop: never returns.  `idle` runs while the console waits for input (main.c's: the FTL's
 * upkeep, checkpoints, GC); what it prints goes around the line being typed. */
void af_console_run(void (*idle)(void));
/* The idle hook af_console_run was given, once: for a command that runs long (`io random`). */
void af_console_idle(void);
/* Run one command line (modified in place); returns the handler's result. */
int af_console_exec(char *line);

/* Commands run, and those that failed (`stats`). */
unsigned long af_console_commands_run(void);
unsigned long af_console_commands_failed(void);

/* Argument helpers: parse a decimal or 0x-hex unsigned number; 0 on success. */
int af_parse_u32(const char *s, uint32_t *out);
int af_parse_u64(const char *s, uint64_t *out);

/* Print a 64-bit value (the firmware's printf is integer-only, 32-bit safe). */
void af_print_hex64(uint64_t v);
void af_print_u64(uint64_t v);

extern const struct af_cmd __af_cmd_start[], __af_cmd_end[];

#endif
