#include <stdio.h>
#include <stdlib.h>
volatile unsigned long sink;
static inline unsigned long mix(unsigned long s, unsigned long i) {
    return s + (i * i ^ (s >> 3));
}
static inline unsigned long inner(unsigned long n) {
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++) s = mix(s, i);
    return s;
}
__attribute__((noinline)) static unsigned long outer(unsigned long n) {
    return inner(n) + 1;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    for (int k = 0; k < n; k++) sink += outer(3000000 + k);
    printf("%lu\n", sink);
    return 0;
}
