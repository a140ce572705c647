/* stackctl-verbs.h: the verbs stackctl.c dispatches to. Each gets the command's words (ARGV[0] is its name), with
 * the options already in arg (stackctl-args.h), and returns an exit code (EXIT_*). */
#pragma once

int verb_dump(int argc, char **argv);          /* stackctl-dump.c */
int verb_list(int argc, char **argv);          /* stackctl-snapshots.c */
int verb_show(int argc, char **argv);          /* stackctl-snapshots.c */
int verb_ps(int argc, char **argv);            /* stackctl-ps.c */
int verb_rules(int argc, char **argv);         /* stackctl-rules.c */
int verb_status(int argc, char **argv);        /* stackctl-status.c */
int verb_problems(int argc, char **argv);      /* stackctl-problems.c */
