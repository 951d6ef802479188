/* atomflash console: line editing, tokenising, dispatch through the
 * AF_COMMAND table (see console.h). */
#include <stdio.h>
#include <string.h>

#include <libbase/console.h>
#include <libbase/uart.h>

#include "console.h"

#define PROMPT "\e[92;1matomflash\e[0m> "

/* --- the terminal -----------------------------------------------------------
 * The idle loop (GC, checkpoints, warnings) prints while a line is being typed.
 * Like a line editor, the console keeps its input line whole: the first byte
 * printed from the idle loop erases the prompt and the partial line ("\r\e[K"),
 * the message gets lines of its own, and once the idle loop returns the prompt
 * and the partial line are drawn again.  This stream replaces libc's stdout
 * (the linker takes it before the archive's), so every printf is covered. */

static void (*idle_hook)(void); /* af_console_run's: the firmware's upkeep while nobody types */
static int in_idle;        /* the line editor is waiting in the idle hook */
static int line_erased;    /* idle output erased the line; redraw it */
static char last_output = '\n';

static void uart_out(char c)
{
	uart_write(c);
	if (c == '\n')
		uart_write('\r');
	last_output = c;
}

static int console_putc(char c, FILE *file)
{
	(void)file;
	if (in_idle && !line_erased) {
		uart_write('\r');
		for (const char *e = "\e[K"; *e; e++)
			uart_write(*e);
		line_erased = 1;
	}
	uart_out(c);
	return (unsigned char)c;
}

static int console_getc(FILE *file)
{
	(void)file;
	while (!uart_read_nonblock())
		;
	return uart_read();
}

static FILE console_stdio = FDEV_SETUP_STREAM(console_putc, console_getc, NULL, _FDEV_SETUP_RW);
FILE *const stdout = &console_stdio;
FILE *const stderr = &console_stdio;
FILE *const stdin = &console_stdio;

static unsigned long commands_run;
static unsigned long commands_failed;

unsigned long af_console_commands_run(void) { return commands_run; }
unsigned long af_console_commands_failed(void) { return commands_failed; }

int af_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	int hex = 0;
	if (!s || !*s)
		return -1;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		hex = 1;
		s += 2;
		if (!*s)
			return -1;
	}
	for (; *s; s++) {
		uint32_t d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (hex && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (hex && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			return -1;
		/* overflow, without 64-bit division */
		if (hex ? (v >> 60) != 0 : (v > 1844674407370955161ull || (v == 1844674407370955161ull && d > 5)))
			return -1;
		v = hex ? v << 4 | d : v * 10 + d;
	}
	*out = v;
	return 0;
}

int af_parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;
	if (af_parse_u64(s, &v) || v > 0xffffffffu)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

void af_print_hex64(uint64_t v)
{
	char buf[19] = "0x";
	for (int i = 0; i < 16; i++)
		buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
	buf[18] = 0;
	fputs(buf, stdout);
}

void af_print_u64(uint64_t v)
{
	char buf[21];
	int i = sizeof(buf) - 1;
	buf[i] = 0;
	do {
		buf[--i] = '0' + (char)(v % 10);
		v /= 10;
	} while (v);
	fputs(&buf[i], stdout);
}

static const struct af_cmd *find_command(const char *name)
{
	for (const struct af_cmd *c = __af_cmd_start; c < __af_cmd_end; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

int af_console_exec(char *line)
{
	char *argv[AF_CONSOLE_ARGS_MAX];
	int argc = 0;
	char *p = line;

	while (*p) {
		while (*p == ' ' || *p == '\t')
			*p++ = 0;
		if (!*p)
			break;
		if (argc == AF_CONSOLE_ARGS_MAX) {
			printf("error: too many arguments (at most %d)\n", AF_CONSOLE_ARGS_MAX - 1);
			commands_failed++;
			return AF_EUSAGE;
		}
		argv[argc++] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
	}
	if (argc == 0)
		return AF_OK;

	const struct af_cmd *c = find_command(argv[0]);
	if (!c) {
		printf("error: unknown command '%s' (try 'help')\n", argv[0]);
		commands_failed++;
		return AF_EUSAGE;
	}
	commands_run++;
	int r = c->fn(argc, argv);
	if (r == AF_EUSAGE)
		printf("error: usage: %s\n", c->usage);
	if (r != AF_OK)
		commands_failed++;
	return r;
}

/* Run the idle loop until a byte arrives; put the prompt and the line back if
 * the idle loop printed over them. */
static void idle_until_input(const char *buf, int n)
{
	while (!readchar_nonblock()) {
		in_idle = 1;
		idle_hook();
		in_idle = 0;
		if (line_erased) {
			if (last_output != '\n')
				putchar('\n');
			fputs(PROMPT, stdout);
			fwrite(buf, 1, (size_t)n, stdout);
			line_erased = 0;
		}
	}
}

static int readline(char *buf, int max)
{
	int n = 0;
	for (;;) {
		idle_until_input(buf, n);
		int c = readchar();
		if (c == '\r' || c == '\n') {
			putchar('\n');
			buf[n] = 0;
			return n;
		}
		if (c == 0x7f || c == 0x08) { /* DEL / backspace */
			if (n > 0) {
				n--;
				fputs("\b \b", stdout);
			}
			continue;
		}
		if (c == 0x03) { /* Ctrl-C: drop the line */
			fputs("^C\n", stdout);
			buf[0] = 0;
			return 0;
		}
		if (c < 0x20 || c > 0x7e)
			continue; /* ignore other control bytes (escape sequences) */
		if (n < max - 1) {
			buf[n++] = (char)c;
			putchar(c);
		}
	}
}

void af_console_idle(void)
{
	if (idle_hook)
		idle_hook();
}

void af_console_run(void (*idle)(void))
{
	char line[AF_CONSOLE_LINE_MAX];
	idle_hook = idle;
	for (;;) {
		fputs(PROMPT, stdout);
		fflush(stdout);
		readline(line, sizeof(line));
		af_console_exec(line);
	}
}

/* --- help ----------------------------------------------------------------- */

static int cmd_help(int argc, char **argv)
{
	if (argc > 2)
		return AF_EUSAGE;
	if (argc == 2) {
		const struct af_cmd *c = find_command(argv[1]);
		if (!c) {
			printf("error: unknown command '%s'\n", argv[1]);
			return AF_EFAIL;
		}
		printf("%s\n    %s\n", c->usage, c->help);
		return AF_OK;
	}
	printf("commands:\n");
	for (const struct af_cmd *c = __af_cmd_start; c < __af_cmd_end; c++)
		printf("  %-22s %s\n", c->usage, c->help);
	return AF_OK;
}
AF_COMMAND(help, "help [command]", "list every command, or show one command's usage", cmd_help);
