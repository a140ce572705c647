/* capture-budget.c: a captures-per-minute budget over a sliding window (see capture-budget.h). */
#include <stdbool.h>
#include <stdlib.h>

#include "base/alloc-util.h"
#include "base/macro.h"
#include "capture-budget.h"

void capture_budget_done(CaptureBudget *b) {
        b->taken = mfree(b->taken);
        b->n_taken = b->n_taken_allocated = 0;
}

static void expire(CaptureBudget *b, uint64_t now) {
        size_t k = 0;

        for (size_t i = 0; i < b->n_taken; i++)
                if (now - b->taken[i] < CAPTURE_BUDGET_WINDOW_USEC)
                        b->taken[k++] = b->taken[i];
        b->n_taken = k;
}

unsigned capture_budget_used(CaptureBudget *b, uint64_t now) {
        expire(b, now);
        return (unsigned) b->n_taken;
}

uint64_t capture_budget_wait_usec(CaptureBudget *b, unsigned max, uint64_t now) {
        uint64_t oldest = UINT64_MAX;

        expire(b, now);
        if (b->n_taken < max)
                return 0;
        for (size_t i = 0; i < b->n_taken; i++)
                oldest = MIN(oldest, b->taken[i]);
        return oldest + CAPTURE_BUDGET_WINDOW_USEC - now;
}

void capture_budget_give_back(CaptureBudget *b) {
        if (b->n_taken > 0)
                b->n_taken--;
}

bool capture_budget_take(CaptureBudget *b, unsigned max, uint64_t now) {
        expire(b, now);
        if (b->n_taken >= max)
                return false;
        if (!GREEDY_REALLOC(b->taken, b->n_taken_allocated, b->n_taken + 1))
                return false;
        b->taken[b->n_taken++] = now;
        return true;
}
