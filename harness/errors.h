// The harness's error types: BadInput is the references' (reference/errors.h), so that a bad
// input found by a reference and one found by the harness are caught alike.
#pragma once

#include "reference/errors.h"
