#include <stdio.h>
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) static unsigned long hot(unsigned long n) {
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++) s += i * i ^ (s >> 3);
    return s;
}
__attribute__((noinline)) static unsigned long warm(unsigned long n) {
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++) s += i ^ (s << 1);
    return s;
}
__attribute__((noinline)) static void level2(int k) {
    sink += hot(3000000);
    if (k % 4 == 0) sink += warm(3000000);
}
__attribute__((noinline)) static void level1(int k) { level2(k); }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    for (int k = 0; k < n; k++) level1(k);
    printf("%lu\n", sink);
    return 0;
}
