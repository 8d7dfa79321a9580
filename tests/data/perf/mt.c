/* mt.c: three threads spinning in spin(), for a multi-threaded capture. */
#include <pthread.h>
#include <stdio.h>

volatile unsigned long sink;

__attribute__((noinline)) static unsigned long spin(unsigned long n)
{
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++)
        s += i * i ^ (s >> 3);
    return s;
}

static void *worker(void *arg)
{
    (void)arg;
    for (int k = 0; k < 10; k++)
        sink += spin(3000000 + (unsigned long)k);
    return NULL;
}

int main(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("%lu\n", sink);
    return 0;
}
