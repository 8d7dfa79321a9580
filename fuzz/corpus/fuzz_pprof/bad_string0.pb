

		



€€€€À°(8€€²¹é€À²¹é(€€€ûÿÿÿÿÿ€ €ûÿÿÿÿÿ("µµ‹"Ú"„º—"Î"ô°­"Ó"Œ­­"«"êË¬"Ê"»®°"Ğ"Öª°"Ä"çº°"€"	Ñö"	ú"
•ş"
ë"šÈ"Ç"—¾"º"ø¼°"ù"ú—°" "‚í¯"("•—°" * * * * *		 *

 * * *	 *
 * * * * * * 2x2	goroutine2count2"runtime.goroutineProfileWithLabels2%/usr/lib/go-1.19/src/runtime/mprof.go20runtime/pprof.runtime_goroutineProfileWithLabels2!runtime/pprof.writeRuntimeProfile2+/usr/lib/go-1.19/src/runtime/pprof/pprof.go2runtime/pprof.writeGoroutine2 runtime/pprof.(*Profile).WriteTo2main.lookup.func12#/work/main/tests/go/profgen/main.go2
main.write2	main.main2runtime.main2$/usr/lib/go-1.19/src/runtime/proc.go2runtime.gopark2runtime.chanrecv2$/usr/lib/go-1.19/src/runtime/chan.go2runtime.chanrecv12main.main.func22main.labeled.func12runtime/pprof.Do2-/usr/lib/go-1.19/src/runtime/pprof/runtime.go2main.labeled2worker2idle-a2idle-b2/work/main/build/h1/profgen2[vdso]2
[vsyscall]HıĞïãÎñõZ`