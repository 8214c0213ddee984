/* Fixture (tests/layout): a header private to core. */
#ifndef FIX_CORE_PRIVATE_H
#define FIX_CORE_PRIVATE_H

#define FIX_CORE_LIMIT 8

#endif
