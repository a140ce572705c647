/* capture-budget.h: a captures-per-minute budget over a sliding window. The rules have one (trigger.h,
 * capture.max_per_minute) and the live captures asked for over HTTP (GET /stacks/PID) another, so that a client
 * polling /stacks cannot spend the rules' snapshots, nor the rules leave an operator without a capture. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define CAPTURE_BUDGET_WINDOW_USEC (60ULL * 1000000ULL)

typedef struct CaptureBudget {
        uint64_t *taken;                /* CLOCK_MONOTONIC times of the captures in the window */
        size_t n_taken, n_taken_allocated;
} CaptureBudget;

void capture_budget_done(CaptureBudget *b);
/* Take one of MAX per minute at NOW: false when they are spent (or on OOM, which refuses the capture). */
bool capture_budget_take(CaptureBudget *b, unsigned max, uint64_t now_usec);
/* How many were taken in the minute before NOW. */
unsigned capture_budget_used(CaptureBudget *b, uint64_t now_usec);
/* Give back the capture taken last (it could not start after all). */
void capture_budget_give_back(CaptureBudget *b);
/* How long from NOW until one is free again (0: one is). */
uint64_t capture_budget_wait_usec(CaptureBudget *b, unsigned max, uint64_t now_usec);
