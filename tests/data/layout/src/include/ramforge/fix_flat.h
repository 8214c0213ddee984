/* Fixture (tests/layout): an internal header of types only outside a layer's folder. */
#ifndef FIX_FLAT_H
#define FIX_FLAT_H

struct fix_flat {
    int x;
};

#endif
