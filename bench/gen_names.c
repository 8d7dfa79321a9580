/*
** bench/gen_names.c: the realistic part of the generator's vocabulary. Call
** paths written by hand after real Go, glibc and Linux profiles (each
** "a;b;c" adds the edges a->b->c, root first), generated library and app
** functions in the same naming styles, service names and pod labels.
**
** Everything here is driven by the caller's PRNG or by fixed tables, so the
** generator stays deterministic.
*/
#include <stdarg.h>
#include <string.h>

#include "bench/gen_int.h"

/* ---- hand-written paths ---------------------------------------------------- */

static const char *const kernel_paths[] = {
    "entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_write;ksys_write;vfs_write;new_sync_write;sock_write_iter;sock_sendmsg;tcp_sendmsg;tcp_sendmsg_locked;tcp_push;__tcp_push_pending_frames;tcp_write_xmit;__tcp_transmit_skb;ip_queue_xmit;__ip_queue_xmit;ip_finish_output2;__dev_queue_xmit;dev_hard_start_xmit",
    "tcp_sendmsg_locked;sk_stream_alloc_skb;__alloc_skb;kmem_cache_alloc_node",
    "tcp_sendmsg_locked;skb_copy_to_page_nocache;copy_user_enhanced_fast_string",
    "__ip_queue_xmit;ip_finish_output2;__local_bh_enable_ip;do_softirq;__do_softirq;net_rx_action;__napi_poll;process_backlog;__netif_receive_skb_one_core;ip_rcv;ip_local_deliver;ip_local_deliver_finish;tcp_v4_rcv;tcp_v4_do_rcv;tcp_rcv_established;tcp_data_queue;sock_def_readable;__wake_up_common_lock;_raw_spin_unlock_irqrestore",
    "vfs_write;ext4_file_write_iter;ext4_buffered_write_iter;generic_perform_write;ext4_da_write_begin;grab_cache_page_write_begin;pagecache_get_page",
    "generic_perform_write;copy_page_from_iter_atomic;copy_user_enhanced_fast_string",
    "entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_read;ksys_read;vfs_read;new_sync_read;sock_read_iter;sock_recvmsg;inet_recvmsg;tcp_recvmsg;tcp_recvmsg_locked;skb_copy_datagram_iter;__skb_datagram_iter;_copy_to_iter;copy_user_enhanced_fast_string",
    "tcp_recvmsg_locked;tcp_cleanup_rbuf;tcp_send_ack;__tcp_send_ack.part.0;__tcp_transmit_skb",
    "vfs_read;filemap_read;filemap_get_pages;filemap_get_read_batch",
    "filemap_read;copy_page_to_iter;_copy_to_iter;copy_user_enhanced_fast_string",
    "do_syscall_64;__x64_sys_sendmsg;__sys_sendmsg;___sys_sendmsg;____sys_sendmsg;sock_sendmsg;unix_stream_sendmsg;sock_def_readable",
    "do_syscall_64;__x64_sys_recvfrom;__sys_recvfrom;sock_recvmsg;inet_recvmsg;tcp_recvmsg",
    "do_syscall_64;__x64_sys_writev;do_writev;vfs_writev;do_iter_write;do_iter_readv_writev;sock_write_iter",
    "do_syscall_64;__x64_sys_epoll_wait;do_epoll_wait;ep_poll;schedule_hrtimeout_range;schedule_hrtimeout_range_clock;schedule;__schedule;finish_task_switch.isra.0",
    "ep_poll;ep_done_scan;ep_item_poll.isra.0;sock_poll;tcp_poll",
    "do_syscall_64;__x64_sys_epoll_ctl;do_epoll_ctl;ep_insert",
    "do_syscall_64;__x64_sys_futex;do_futex;futex_wait;futex_wait_queue_me;schedule;__schedule;finish_task_switch.isra.0",
    "do_futex;futex_wake;wake_up_q;try_to_wake_up;_raw_spin_unlock_irqrestore",
    "try_to_wake_up;ttwu_do_activate;enqueue_task_fair;enqueue_entity;update_load_avg",
    "do_syscall_64;__x64_sys_nanosleep;hrtimer_nanosleep;do_nanosleep;schedule",
    "do_syscall_64;__x64_sys_sched_yield;do_sched_yield;schedule",
    "__schedule;pick_next_task_fair;newidle_balance;load_balance;find_busiest_group;update_sd_lb_stats.constprop.0",
    "__schedule;psi_task_switch;psi_group_change",
    "do_syscall_64;__x64_sys_madvise;do_madvise;zap_page_range;unmap_page_range;zap_pte_range;tlb_finish_mmu;release_pages",
    "do_syscall_64;__x64_sys_mmap;ksys_mmap_pgoff;vm_mmap_pgoff;do_mmap;mmap_region;vma_link",
    "do_syscall_64;__x64_sys_munmap;__vm_munmap;__do_munmap;unmap_region;free_pgtables",
    "do_syscall_64;__x64_sys_tgkill;do_tkill;do_send_specific;do_send_sig_info;complete_signal",
    "do_syscall_64;syscall_exit_to_user_mode;exit_to_user_mode_prepare;arch_do_signal_or_restart;get_signal",
    "do_syscall_64;__x64_sys_clock_gettime;__x64_sys_clock_gettime.cold",
    "do_syscall_64;__x64_sys_openat;do_sys_openat2;do_filp_open;path_openat;link_path_walk.part.0;walk_component;lookup_fast",
    "do_syscall_64;__x64_sys_close;close_fd;filp_close;fput",
    "do_syscall_64;__x64_sys_accept4;__sys_accept4;do_accept;inet_accept;inet_csk_accept",
    "do_syscall_64;__x64_sys_connect;__sys_connect;inet_stream_connect;__inet_stream_connect;tcp_v4_connect;tcp_connect",
    "asm_exc_page_fault;exc_page_fault;do_user_addr_fault;handle_mm_fault;__handle_mm_fault;do_anonymous_page;alloc_pages_vma;__alloc_pages;get_page_from_freelist;clear_page_erms",
    "__handle_mm_fault;do_huge_pmd_anonymous_page;clear_huge_page;clear_subpage;clear_page_erms",
    "handle_mm_fault;__handle_mm_fault;do_fault;filemap_map_pages;next_uptodate_page",
    "asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt;__sysvec_apic_timer_interrupt;hrtimer_interrupt;__hrtimer_run_queues;tick_sched_timer;tick_sched_handle;update_process_times;scheduler_tick;task_tick_fair;update_curr",
    "asm_sysvec_apic_timer_interrupt;irq_exit_rcu;__do_softirq;run_rebalance_domains;rebalance_domains",
    "asm_common_interrupt;common_interrupt;__common_interrupt;handle_edge_irq;handle_irq_event;__handle_irq_event_percpu;vring_interrupt;skb_recv_done",
    "kmem_cache_alloc_node;__slab_alloc.constprop.0;___slab_alloc;allocate_slab",
    NULL
};

static const char *const libc_paths[] = {
    "__libc_write;entry_SYSCALL_64_after_hwframe",
    "__libc_read;entry_SYSCALL_64_after_hwframe",
    "__GI___writev;entry_SYSCALL_64_after_hwframe",
    "__libc_sendmsg;entry_SYSCALL_64_after_hwframe",
    "__libc_recv;entry_SYSCALL_64_after_hwframe",
    "epoll_wait;entry_SYSCALL_64_after_hwframe",
    "__GI___clock_gettime;__vdso_clock_gettime;do_hres",
    "malloc;_int_malloc;sysmalloc;__GI___default_morecore;__brk;entry_SYSCALL_64_after_hwframe",
    "malloc;_int_malloc;malloc_consolidate",
    "free;_int_free;malloc_trim",
    "__GI___pthread_mutex_lock;__lll_lock_wait;futex_wait;entry_SYSCALL_64_after_hwframe",
    "__GI___pthread_mutex_unlock;__lll_lock_wake;entry_SYSCALL_64_after_hwframe",
    "pthread_cond_wait@@GLIBC_2.3.2;__pthread_cond_wait_common;__futex_abstimed_wait_common;entry_SYSCALL_64_after_hwframe",
    "__memmove_avx_unaligned_erms;asm_exc_page_fault",
    "__memset_avx2_unaligned_erms;asm_exc_page_fault",
    "__GI___qsort_r;msort_with_tmp.part.0;msort_with_tmp.part.0;__memcmp_avx2_movbe",
    "__vfprintf_internal;__printf_fp_l;hack_digit",
    "__snprintf;__vsnprintf_internal;__vfprintf_internal;__strchrnul_avx2",
    "__strlen_avx2", "__strcmp_avx2", "__memcmp_avx2_movbe", "__memchr_avx2",
    "__sendfile;entry_SYSCALL_64_after_hwframe",
    "__GI___ioctl;entry_SYSCALL_64_after_hwframe",
    NULL
};

/* Go runtime and libraries; "runtime." names land in T_RUNTIME. */
static const char *const go_paths[] = {
    "runtime.goexit;runtime.gcBgMarkWorker;runtime.systemstack;runtime.gcBgMarkWorker.func2;runtime.gcDrain;runtime.scanobject;runtime.findObject",
    "runtime.gcDrain;runtime.markroot;runtime.markroot.func1;runtime.scanstack;runtime.scanframeworker;runtime.scanblock;runtime.greyobject",
    "runtime.gcDrain;runtime.greyobject", "runtime.scanobject;runtime.greyobject",
    "runtime.scanobject;runtime.(*gcBits).bitp", "runtime.gcDrain;runtime.(*gcWork).balance;runtime.handoff",
    "runtime.scanobject;runtime.spanOf", "runtime.gcDrain;runtime.markrootSpans;runtime.markrootSpans.func1",
    "runtime.goexit;runtime.bgsweep;runtime.sweepone;runtime.(*sweepLocked).sweep;runtime.(*mheap).freeSpan;runtime.systemstack;runtime.(*mheap).freeSpan.func1;runtime.(*mheap).freeSpanLocked",
    "runtime.(*sweepLocked).sweep;runtime.(*gcBits).bitp", "runtime.sweepone;runtime.(*spanSet).pop",
    "runtime.goexit;runtime.bgscavenge;runtime.(*scavengerState).run;runtime.(*pageAlloc).scavenge;runtime.(*pageAlloc).scavengeOne;runtime.sysUnused;runtime.sysUnusedOS;runtime.madvise",
    "runtime.madvise;entry_SYSCALL_64_after_hwframe",
    "runtime.mallocgc;runtime.(*mcache).nextFree;runtime.(*mcache).refill;runtime.(*mcentral).cacheSpan;runtime.(*mcentral).grow;runtime.(*mheap).alloc;runtime.systemstack;runtime.(*mheap).alloc.func1;runtime.(*mheap).allocSpan;runtime.(*pageAlloc).alloc",
    "runtime.(*mcentral).cacheSpan;runtime.(*spanSet).pop", "runtime.(*mcentral).cacheSpan;runtime.(*sweepLocked).sweep",
    "runtime.mallocgc;runtime.memclrNoHeapPointers;asm_exc_page_fault",
    "runtime.mallocgc;runtime.gcAssistAlloc;runtime.systemstack;runtime.gcAssistAlloc.func1;runtime.gcAssistAlloc1;runtime.gcDrainN;runtime.scanobject",
    "runtime.mallocgc;runtime.heapBitsSetType", "runtime.mallocgc;runtime.profilealloc;runtime.mProf_Malloc;runtime.callers",
    "runtime.mallocgc;runtime.nextFreeFast", "runtime.mallocgc;runtime.(*mheap).allocLarge",
    "runtime.newobject;runtime.mallocgc", "runtime.makeslice;runtime.mallocgc",
    "runtime.growslice;runtime.mallocgc", "runtime.growslice;runtime.memmove",
    "runtime.makemap;runtime.makeBucketArray;runtime.newarray;runtime.mallocgc",
    "runtime.makemap_small;runtime.newobject",
    "runtime.mapassign_faststr;runtime.hashGrow;runtime.makeBucketArray",
    "runtime.mapassign_faststr;runtime.growWork_faststr;runtime.evacuate_faststr;runtime.memmove",
    "runtime.mapassign_faststr;runtime.aeshashbody", "runtime.mapaccess2_faststr;runtime.aeshashbody",
    "runtime.mapaccess1_faststr;runtime.aeshashbody", "runtime.mapaccess2;runtime.memhash",
    "runtime.mapassign;runtime.newobject", "runtime.mapiternext", "runtime.mapaccess1_fast64",
    "runtime.concatstrings;runtime.rawstringtmp;runtime.rawstring;runtime.mallocgc",
    "runtime.concatstring3;runtime.concatstrings", "runtime.slicebytetostring;runtime.mallocgc",
    "runtime.stringtoslicebyte;runtime.rawbyteslice;runtime.mallocgc",
    "runtime.convTstring;runtime.mallocgc", "runtime.convT64;runtime.mallocgc", "runtime.convT;runtime.mallocgc",
    "runtime.assertE2I2;runtime.getitab", "runtime.typedmemmove;runtime.bulkBarrierPreWrite",
    "runtime.chansend1;runtime.chansend;runtime.send;runtime.goready;runtime.systemstack;runtime.goready.func1;runtime.ready;runtime.wakep;runtime.startm;runtime.notewakeup;runtime.futexwakeup;runtime.futex",
    "runtime.chanrecv1;runtime.chanrecv;runtime.gopark;runtime.mcall;runtime.park_m;runtime.schedule;runtime.findRunnable;runtime.netpoll;runtime.epollwait",
    "runtime.chanrecv2;runtime.chanrecv", "runtime.selectgo;runtime.gopark", "runtime.selectgo;runtime.sellock",
    "runtime.mcall;runtime.park_m;runtime.schedule;runtime.findRunnable;runtime.stopm;runtime.mPark;runtime.notesleep;runtime.futexsleep;runtime.futex",
    "runtime.findRunnable;runtime.runqsteal;runtime.runqgrab;runtime.usleep",
    "runtime.findRunnable;runtime.checkTimers;runtime.runtimer;runtime.runOneTimer",
    "runtime.schedule;runtime.execute;runtime.gogo",
    "runtime.mcall;runtime.goexit0;runtime.gdestroy", "runtime.mcall;runtime.gosched_m;runtime.schedule",
    "runtime.futex;entry_SYSCALL_64_after_hwframe", "runtime.epollwait;entry_SYSCALL_64_after_hwframe",
    "runtime.usleep;entry_SYSCALL_64_after_hwframe", "runtime.write1;entry_SYSCALL_64_after_hwframe",
    "runtime.tgkill;entry_SYSCALL_64_after_hwframe", "runtime.nanotime1", "runtime.walltime",
    "runtime.lock2;runtime.futexsleep;runtime.futex", "runtime.unlock2;runtime.futexwakeup",
    "runtime.mstart;runtime.mstart0;runtime.mstart1;runtime.sysmon;runtime.usleep",
    "runtime.sysmon;runtime.retake;runtime.preemptone;runtime.preemptM;runtime.signalM;runtime.tgkill",
    "runtime.sysmon;runtime.netpoll;runtime.epollwait",
    "runtime.morestack;runtime.newstack;runtime.copystack;runtime.memmove",
    "runtime.newstack;runtime.gopreempt_m;runtime.goschedImpl;runtime.schedule",
    "runtime.main;runtime.doInit;runtime.doInit1",
    "runtime.semacquire1;runtime.goparkunlock;runtime.gopark",
    "runtime.semrelease1;runtime.readyWithTime;runtime.goready",
    "runtime.deferreturn", "runtime.memequal", "runtime.cmpstring", "runtime.memhash64",
    "runtime.asyncPreempt", "runtime.procyield", "runtime.osyield;entry_SYSCALL_64_after_hwframe",
    "runtime.goexit;runtime.runfinq;runtime.gopark",
    "syscall.Syscall;syscall.RawSyscall6;runtime/internal/syscall.Syscall6;entry_SYSCALL_64_after_hwframe",
    "syscall.Syscall;runtime.entersyscall;runtime.reentersyscall", "syscall.Syscall;runtime.exitsyscall;runtime.exitsyscallfast",
    "syscall.write;syscall.Syscall", "syscall.read;syscall.Syscall", "syscall.Write;syscall.write", "syscall.Read;syscall.read",
    "internal/poll.(*FD).Write;syscall.Write",
    "internal/poll.(*FD).Write;internal/poll.(*fdMutex).rwlock",
    "internal/poll.(*FD).Read;internal/poll.ignoringEINTRIO;syscall.Read",
    "internal/poll.(*FD).Read;internal/poll.(*pollDesc).waitRead;internal/poll.(*pollDesc).wait;internal/poll.runtime_pollWait;runtime.netpollblock;runtime.gopark",
    "internal/poll.(*FD).Accept;internal/poll.accept;syscall.Accept4;syscall.Syscall",
    "net.(*conn).Write;net.(*netFD).Write;internal/poll.(*FD).Write",
    "net.(*conn).Read;net.(*netFD).Read;internal/poll.(*FD).Read",
    "net.(*TCPListener).Accept;net.(*TCPListener).accept;net.(*netFD).accept;internal/poll.(*FD).Accept",
    "bufio.(*Writer).Flush;net.(*conn).Write", "bufio.(*Reader).Read;net.(*conn).Read",
    "bufio.(*Reader).fill;net.(*conn).Read", "bufio.(*Writer).Write;bufio.(*Writer).Flush",
    "bufio.(*Reader).ReadSlice;bufio.(*Reader).fill", "bufio.(*Reader).ReadLine;bufio.(*Reader).ReadSlice",
    "net/http.(*conn).serve;net/http.serverHandler.ServeHTTP;net/http.HandlerFunc.ServeHTTP",
    "net/http.(*conn).serve;net/http.(*conn).readRequest;net/http.readRequest;net/textproto.(*Reader).ReadMIMEHeader;net/textproto.readMIMEHeader;net/textproto.(*Reader).readContinuedLineSlice;bufio.(*Reader).ReadLine",
    "net/textproto.readMIMEHeader;net/textproto.canonicalMIMEHeaderKey", "net/textproto.readMIMEHeader;runtime.mapassign_faststr",
    "net/http.readRequest;net/url.ParseRequestURI;net/url.parse;net/url.unescape",
    "net/http.(*conn).readRequest;context.WithCancel;context.withCancel;context.(*cancelCtx).propagateCancel",
    "net/http.(*conn).serve;net/http.(*response).finishRequest;bufio.(*Writer).Flush",
    "net/http.(*response).finishRequest;net/http.(*chunkWriter).close;net/http.(*chunkWriter).writeHeader;net/http.Header.writeSubset;net/http.Header.sortedKeyValues;sort.Sort",
    "net/http.(*conn).serve;net/http.(*connReader).backgroundRead",
    "net/http.(*response).Write;net/http.(*response).write;bufio.(*Writer).Write;net/http.(*chunkWriter).Write;net/http.(*chunkWriter).writeHeader",
    "net/http.(*Server).Serve;net.(*TCPListener).Accept",
    "net/http.(*Client).Do;net/http.(*Client).do;net/http.(*Client).send;net/http.send;net/http.(*Transport).RoundTrip;net/http.(*Transport).roundTrip;net/http.(*persistConn).roundTrip;runtime.selectgo",
    "net/http.(*Transport).roundTrip;net/http.(*Transport).getConn;net/http.(*Transport).queueForIdleConn",
    "net/http.(*persistConn).readLoop;net/http.ReadResponse;net/textproto.(*Reader).ReadMIMEHeader",
    "net/http.(*persistConn).readLoop;bufio.(*Reader).Peek;bufio.(*Reader).fill",
    "net/http.(*persistConn).writeLoop;net/http.(*Request).write;bufio.(*Writer).Flush",
    "net/http.(*persistConn).writeLoop;runtime.selectgo",
    "encoding/json.Marshal;encoding/json.(*encodeState).marshal;encoding/json.(*encodeState).reflectValue;encoding/json.structEncoder.encode;encoding/json.ptrEncoder.encode;encoding/json.structEncoder.encode",
    "encoding/json.structEncoder.encode;encoding/json.sliceEncoder.encode;encoding/json.arrayEncoder.encode;encoding/json.ptrEncoder.encode",
    "encoding/json.structEncoder.encode;encoding/json.stringEncoder;encoding/json.appendString",
    "encoding/json.structEncoder.encode;encoding/json.mapEncoder.encode;encoding/json.resolveKeyName;sort.Slice",
    "encoding/json.structEncoder.encode;encoding/json.intEncoder;strconv.AppendInt;strconv.formatBits",
    "encoding/json.structEncoder.encode;encoding/json.floatEncoder.encode;strconv.AppendFloat;strconv.genericFtoa;strconv.ryuFtoaShortest",
    "encoding/json.structEncoder.encode;reflect.Value.Field", "encoding/json.Marshal;encoding/json.newEncodeState;sync.(*Pool).Get",
    "encoding/json.(*encodeState).marshal;encoding/json.valueEncoder;encoding/json.typeEncoder;sync.(*Map).Load",
    "encoding/json.(*Encoder).Encode;encoding/json.(*encodeState).marshal",
    "encoding/json.Unmarshal;encoding/json.(*decodeState).unmarshal;encoding/json.(*decodeState).value;encoding/json.(*decodeState).object;encoding/json.(*decodeState).value",
    "encoding/json.(*decodeState).value;encoding/json.(*decodeState).array;encoding/json.(*decodeState).value",
    "encoding/json.(*decodeState).object;encoding/json.(*decodeState).literalStore;reflect.Value.SetString",
    "encoding/json.(*decodeState).literalStore;encoding/json.unquote;encoding/json.unquoteBytes",
    "encoding/json.(*decodeState).object;encoding/json.(*decodeState).rescanLiteral",
    "encoding/json.(*decodeState).object;encoding/json.cachedTypeFields;sync.(*Map).Load",
    "encoding/json.(*decodeState).object;runtime.mapassign_faststr", "encoding/json.(*decodeState).object;bytes.EqualFold",
    "encoding/json.Unmarshal;encoding/json.checkValid;encoding/json.stateInString",
    "encoding/json.(*Decoder).Decode;encoding/json.(*Decoder).readValue;encoding/json.(*Decoder).refill;io.(*LimitedReader).Read",
    "crypto/tls.(*Conn).Write;crypto/tls.(*Conn).writeRecordLocked;crypto/tls.(*halfConn).encrypt;crypto/cipher.(*gcmAsm).Seal;crypto/aes.gcmAesEnc",
    "crypto/tls.(*Conn).writeRecordLocked;crypto/tls.(*Conn).write;net.(*conn).Write",
    "crypto/tls.(*Conn).Read;crypto/tls.(*Conn).readRecord;crypto/tls.(*Conn).readRecordOrCCS;crypto/tls.(*halfConn).decrypt;crypto/cipher.(*gcmAsm).Open;crypto/aes.gcmAesDec",
    "crypto/tls.(*Conn).readRecordOrCCS;crypto/tls.(*Conn).readFromUntil;bytes.(*Buffer).ReadFrom;crypto/tls.(*atLeastReader).Read;net.(*conn).Read",
    "crypto/tls.(*Conn).HandshakeContext;crypto/tls.(*Conn).handshakeContext;crypto/tls.(*Conn).serverHandshake;crypto/tls.(*serverHandshakeStateTLS13).handshake;crypto/tls.(*serverHandshakeStateTLS13).sendServerCertificate;crypto/ecdsa.SignASN1;crypto/ecdsa.signNISTEC;crypto/internal/nistec.(*P256Point).ScalarBaseMult;crypto/internal/nistec.p256OrdSqr",
    "crypto/tls.(*serverHandshakeStateTLS13).handshake;crypto/tls.(*serverHandshakeStateTLS13).processClientHello;crypto/ecdh.(*nistCurve[...]).ecdh;crypto/internal/nistec.(*P256Point).ScalarMult;crypto/internal/nistec.p256Sqr",
    "net/http.(*conn).serve;crypto/tls.(*Conn).HandshakeContext",
    "compress/gzip.(*Writer).Write;compress/flate.(*Writer).Write;compress/flate.(*compressor).write;compress/flate.(*compressor).deflate;compress/flate.(*compressor).findMatch;compress/flate.matchLen",
    "compress/flate.(*compressor).deflate;compress/flate.(*compressor).writeBlock;compress/flate.(*huffmanBitWriter).writeBlock;compress/flate.(*huffmanBitWriter).writeTokens;compress/flate.(*huffmanBitWriter).writeCode",
    "compress/flate.(*compressor).deflate;compress/flate.hash4", "compress/flate.(*compressor).write;compress/flate.(*compressor).fillDeflate;runtime.memmove",
    "compress/gzip.(*Writer).Close;compress/flate.(*Writer).Close;compress/flate.(*compressor).close;compress/flate.(*compressor).deflate",
    "compress/gzip.(*Reader).Read;compress/flate.(*decompressor).Read;compress/flate.(*decompressor).huffmanBlock;compress/flate.(*decompressor).huffSym",
    "compress/gzip.(*Reader).Read;hash/crc32.Update;hash/crc32.ieeeCLMUL",
    "database/sql.(*DB).QueryContext;database/sql.(*DB).query;database/sql.(*DB).queryDC;database/sql.ctxDriverQuery;github.com/lib/pq.(*conn).QueryContext;github.com/lib/pq.(*conn).query;github.com/lib/pq.(*conn).recv1;github.com/lib/pq.(*conn).recv1Buf;bufio.(*Reader).Read",
    "github.com/lib/pq.(*conn).query;github.com/lib/pq.(*conn).send;net.(*conn).Write",
    "github.com/lib/pq.(*conn).query;github.com/lib/pq.(*conn).readRowDescription",
    "database/sql.(*DB).query;database/sql.(*DB).conn;runtime.selectgo",
    "database/sql.(*DB).queryDC;database/sql.withLock;database/sql.(*DB).queryDC.func1",
    "database/sql.(*DB).ExecContext;database/sql.(*DB).exec;database/sql.(*DB).execDC;database/sql.resultFromStatement;github.com/lib/pq.(*stmt).Exec;github.com/lib/pq.(*stmt).exec;github.com/lib/pq.(*conn).send",
    "database/sql.(*Rows).Next;database/sql.(*Rows).nextLocked;github.com/lib/pq.(*rows).Next;github.com/lib/pq.(*conn).recv1Buf;github.com/lib/pq.(*conn).recvMessage;io.ReadAtLeast;bufio.(*Reader).Read",
    "github.com/lib/pq.(*rows).Next;github.com/lib/pq.decode;github.com/lib/pq.textDecode;strconv.ParseInt",
    "database/sql.(*Rows).Scan;database/sql.convertAssignRows;strconv.ParseInt",
    "database/sql.convertAssignRows;database/sql.asString", "database/sql.convertAssignRows;reflect.Value.Set",
    "database/sql.(*Rows).Close;database/sql.(*Rows).close;database/sql.(*driverConn).releaseConn;database/sql.(*DB).putConn",
    "github.com/redis/go-redis/v9.(*Client).Process;github.com/redis/go-redis/v9.(*baseClient).process;github.com/redis/go-redis/v9.(*baseClient)._process;github.com/redis/go-redis/v9/internal/pool.(*Conn).WithReader;github.com/redis/go-redis/v9/internal/proto.(*Reader).ReadReply;github.com/redis/go-redis/v9/internal/proto.(*Reader).readLine;bufio.(*Reader).ReadSlice",
    "github.com/redis/go-redis/v9.(*baseClient)._process;github.com/redis/go-redis/v9/internal/pool.(*Conn).WithWriter;github.com/redis/go-redis/v9/internal/proto.(*Writer).WriteArgs;github.com/redis/go-redis/v9/internal/proto.(*Writer).WriteArg",
    "github.com/redis/go-redis/v9/internal/pool.(*Conn).WithWriter;bufio.(*Writer).Flush",
    "github.com/redis/go-redis/v9.(*baseClient)._process;github.com/redis/go-redis/v9.(*baseClient).getConn;github.com/redis/go-redis/v9/internal/pool.(*ConnPool).Get",
    "github.com/redis/go-redis/v9.(*Client).Process;github.com/redis/go-redis/v9.(*StringCmd).readReply;github.com/redis/go-redis/v9/internal/proto.(*Reader).ReadString",
    "google.golang.org/grpc.(*Server).serveStreams.func1.2;google.golang.org/grpc.(*Server).handleStream;google.golang.org/grpc.(*Server).processUnaryRPC",
    "google.golang.org/grpc.(*Server).processUnaryRPC;google.golang.org/grpc.(*Server).sendResponse;google.golang.org/grpc.encode;google.golang.org/grpc/encoding/proto.codec.Marshal;google.golang.org/protobuf/proto.MarshalOptions.marshal;google.golang.org/protobuf/internal/impl.(*MessageInfo).marshal;google.golang.org/protobuf/internal/impl.(*MessageInfo).marshalAppendPointer;google.golang.org/protobuf/internal/impl.appendStringValidateUTF8",
    "google.golang.org/protobuf/internal/impl.(*MessageInfo).marshalAppendPointer;google.golang.org/protobuf/internal/impl.appendMessageSliceInfo;google.golang.org/protobuf/internal/impl.(*MessageInfo).marshalAppendPointer",
    "google.golang.org/protobuf/proto.MarshalOptions.marshal;google.golang.org/protobuf/internal/impl.(*MessageInfo).sizePointer;google.golang.org/protobuf/internal/impl.(*MessageInfo).sizePointerSlow",
    "google.golang.org/grpc.(*Server).sendResponse;google.golang.org/grpc/internal/transport.(*http2Server).Write;google.golang.org/grpc/internal/transport.(*controlBuffer).put",
    "google.golang.org/grpc.(*Server).processUnaryRPC;google.golang.org/grpc.recvAndDecompress;google.golang.org/grpc.(*parser).recvMsg;io.ReadAtLeast;google.golang.org/grpc/internal/transport.(*Stream).Read",
    "google.golang.org/grpc.(*Server).processUnaryRPC.func1;google.golang.org/grpc/encoding/proto.codec.Unmarshal;google.golang.org/protobuf/proto.UnmarshalOptions.unmarshal;google.golang.org/protobuf/internal/impl.(*MessageInfo).unmarshalPointer;google.golang.org/protobuf/internal/impl.consumeStringValidateUTF8",
    "google.golang.org/grpc.(*Server).processUnaryRPC;google.golang.org/grpc.(*Server).processUnaryRPC.func1",
    "google.golang.org/grpc/internal/transport.newHTTP2Server.func2;google.golang.org/grpc/internal/transport.(*loopyWriter).run;google.golang.org/grpc/internal/transport.(*loopyWriter).processData;google.golang.org/grpc/internal/transport.(*bufWriter).Write",
    "google.golang.org/grpc/internal/transport.(*loopyWriter).run;google.golang.org/grpc/internal/transport.(*bufWriter).Flush;net.(*conn).Write",
    "google.golang.org/grpc/internal/transport.(*loopyWriter).run;google.golang.org/grpc/internal/transport.(*controlBuffer).get;runtime.selectgo",
    "google.golang.org/grpc/internal/transport.(*http2Server).HandleStreams;golang.org/x/net/http2.(*Framer).ReadFrame;golang.org/x/net/http2.readFrameHeader;io.ReadAtLeast;bufio.(*Reader).Read",
    "google.golang.org/grpc/internal/transport.(*http2Server).HandleStreams;google.golang.org/grpc/internal/transport.(*http2Server).operateHeaders;golang.org/x/net/http2/hpack.(*Decoder).Write;golang.org/x/net/http2/hpack.(*Decoder).parseHeaderFieldRepr",
    "google.golang.org/grpc.(*ClientConn).Invoke;google.golang.org/grpc.invoke;google.golang.org/grpc.(*clientStream).RecvMsg;google.golang.org/grpc.(*csAttempt).recvMsg;google.golang.org/grpc.recvAndDecompress",
    "google.golang.org/grpc.invoke;google.golang.org/grpc.newClientStream;google.golang.org/grpc.newClientStreamWithParams",
    "fmt.Sprintf;fmt.(*pp).doPrintf;fmt.(*pp).printArg;fmt.(*pp).fmtInteger;fmt.(*fmt).fmtInteger",
    "fmt.(*pp).printArg;fmt.(*pp).fmtString;fmt.(*fmt).fmtS;fmt.(*fmt).padString",
    "fmt.(*pp).printArg;fmt.(*pp).handleMethods;fmt.(*pp).printValue", "fmt.Sprintf;runtime.slicebytetostring",
    "fmt.Sprintf;fmt.newPrinter;sync.(*Pool).Get", "fmt.Errorf;fmt.(*pp).doPrintf",
    "strconv.Itoa;strconv.FormatInt;strconv.formatBits", "strconv.ParseFloat;strconv.atof64;strconv.readFloat",
    "strconv.Quote;strconv.quoteWith;strconv.appendQuotedWith", "strconv.ParseInt;strconv.ParseUint",
    "strings.(*Builder).WriteString;runtime.growslice", "strings.Split;strings.genSplit;runtime.makeslice",
    "strings.ToLower;strings.(*Builder).Grow", "strings.Index;internal/bytealg.IndexByteString",
    "strings.Replace;strings.(*Builder).WriteString", "strings.Join;strings.(*Builder).WriteString",
    "strings.Fields", "strings.TrimSpace", "strings.EqualFold",
    "bytes.(*Buffer).Write;bytes.(*Buffer).grow;bytes.growSlice;runtime.growslice",
    "bytes.(*Buffer).WriteString;bytes.(*Buffer).grow", "bytes.(*Buffer).ReadFrom;bytes.(*Buffer).grow",
    "sort.Slice;sort.pdqsort_func;sort.insertionSort_func", "sort.pdqsort_func;sort.partition_func",
    "sort.pdqsort_func;sort.pdqsort_func", "sort.Sort;sort.pdqsort;sort.insertionSort", "sort.SearchFloat64s;sort.Search",
    "reflect.Value.Call;reflect.Value.call;reflect.funcLayout;sync.(*Map).Load", "reflect.Value.call;runtime.reflectcall",
    "reflect.New;reflect.unsafe_New;runtime.newobject", "reflect.Value.Field", "reflect.Value.MethodByName;reflect.(*rtype).MethodByName",
    "reflect.Value.Set;reflect.typedmemmove;runtime.typedmemmove", "reflect.Value.SetString", "reflect.DeepEqual;reflect.deepValueEqual;reflect.deepValueEqual",
    "sync.(*Mutex).Lock;sync.(*Mutex).lockSlow;sync.runtime_SemacquireMutex;runtime.semacquire1",
    "sync.(*Mutex).lockSlow;runtime.procyield", "sync.(*Mutex).Unlock;sync.(*Mutex).unlockSlow;sync.runtime_Semrelease;runtime.semrelease1",
    "sync.(*RWMutex).RLock;sync.runtime_SemacquireRWMutexR;runtime.semacquire1", "sync.(*RWMutex).Lock;sync.(*Mutex).Lock",
    "sync.(*Pool).Get;sync.(*Pool).getSlow;sync.(*poolChain).popTail", "sync.(*Pool).Put;sync.(*poolChain).pushHead",
    "sync.(*WaitGroup).Wait;sync.runtime_Semacquire;runtime.semacquire1", "sync.(*Map).Load", "sync.(*Once).doSlow",
    "context.WithTimeout;context.WithDeadline;context.WithDeadlineCause;time.AfterFunc;time.startTimer;runtime.addtimer;runtime.doaddtimer",
    "context.WithDeadlineCause;context.(*cancelCtx).propagateCancel", "context.(*cancelCtx).cancel;context.(*timerCtx).cancel;time.(*Timer).Stop;runtime.deltimer",
    "time.Now;runtime.walltime", "time.Since;time.Now", "time.Time.Format;time.Time.AppendFormat;time.appendInt",
    "time.Parse;time.parse;time.getnum", "time.Sleep;runtime.gopark",
    "regexp.(*Regexp).MatchString;regexp.(*Regexp).doMatch;regexp.(*Regexp).doExecute;regexp.(*Regexp).backtrack;regexp.(*bitState).push",
    "regexp.(*Regexp).backtrack;regexp.(*Regexp).tryBacktrack;regexp.(*bitState).shouldVisit",
    "regexp.(*Regexp).doExecute;regexp.(*machine).match;regexp.(*machine).step;regexp.(*machine).add;regexp.(*machine).add",
    "regexp.(*Regexp).FindStringSubmatch;regexp.(*Regexp).doExecute", "regexp.(*Regexp).ReplaceAllString;regexp.(*Regexp).replaceAll;regexp.(*Regexp).doExecute",
    "crypto/sha256.Sum256;crypto/sha256.(*digest).checkSum;crypto/sha256.(*digest).Write;crypto/sha256.block;crypto/sha256.blockAVX2",
    "crypto/hmac.(*hmac).Write;crypto/sha256.(*digest).Write", "crypto/hmac.New;crypto/sha256.New",
    "crypto/rand.Read;crypto/rand.(*reader).Read;crypto/rand.getRandom;syscall.Syscall",
    "hash/crc32.ChecksumIEEE;hash/crc32.update;hash/crc32.ieeeCLMUL", "hash/fnv.(*sum64a).Write",
    "io.Copy;io.copyBuffer;bufio.(*Writer).ReadFrom", "io.copyBuffer;net.(*conn).Read",
    "io.ReadAll;runtime.growslice", "io.ReadAll;compress/gzip.(*Reader).Read", "io.ReadAll;crypto/tls.(*Conn).Read",
    "io.ReadFull;io.ReadAtLeast;bufio.(*Reader).Read",
    "os.ReadFile;os.(*File).Read;internal/poll.(*FD).Read", "os.(*File).Write;internal/poll.(*FD).Write",
    "os.Open;os.OpenFile;os.openFileNolog;syscall.Open;syscall.openat;syscall.Syscall6;runtime/internal/syscall.Syscall6",
    "encoding/base64.(*Encoding).EncodeToString;encoding/base64.(*Encoding).Encode",
    "encoding/base64.(*Encoding).DecodeString;encoding/base64.(*Encoding).Decode;encoding/base64.(*Encoding).decodeQuantum",
    "encoding/hex.EncodeToString;encoding/hex.Encode", "encoding/binary.Write;encoding/binary.dataSize",
    "math/big.(*Int).Exp;math/big.nat.expNN;math/big.nat.montgomery;math/big.addMulVVW",
    "unicode/utf8.RuneCountInString", "unicode/utf8.DecodeRuneInString", "unicode.IsSpace",
    "html/template.(*Template).Execute;text/template.(*Template).Execute;text/template.(*Template).execute;text/template.(*state).walk;text/template.(*state).walkRange;text/template.(*state).walk",
    "text/template.(*state).walk;text/template.(*state).evalPipeline;text/template.(*state).evalCommand;text/template.(*state).evalField;reflect.Value.MethodByName",
    "text/template.(*state).evalCommand;text/template.(*state).evalFunction;text/template.(*state).evalCall;reflect.Value.Call",
    "text/template.(*state).walk;text/template.(*state).walkIfOrWith;text/template.(*state).walk",
    "text/template.(*state).evalPipeline;text/template.(*state).printValue;fmt.Fprint;fmt.(*pp).doPrint",
    "html/template.htmlEscaper;html/template.htmlReplacer;strings.(*Builder).WriteString",
    "go.uber.org/zap.(*Logger).Info;go.uber.org/zap.(*Logger).check;go.uber.org/zap/zapcore.(*ioCore).Check",
    "go.uber.org/zap/zapcore.(*CheckedEntry).Write;go.uber.org/zap/zapcore.(*ioCore).Write;go.uber.org/zap/zapcore.(*jsonEncoder).EncodeEntry;go.uber.org/zap/zapcore.(*jsonEncoder).AppendString;go.uber.org/zap/zapcore.(*jsonEncoder).safeAddString",
    "go.uber.org/zap/zapcore.(*jsonEncoder).EncodeEntry;go.uber.org/zap/zapcore.addFields;go.uber.org/zap/zapcore.Field.AddTo;go.uber.org/zap/zapcore.(*jsonEncoder).AddString",
    "go.uber.org/zap/zapcore.(*jsonEncoder).EncodeEntry;go.uber.org/zap/zapcore.ISO8601TimeEncoder;time.Time.AppendFormat",
    "go.uber.org/zap/zapcore.(*ioCore).Write;go.uber.org/zap/zapcore.(*lockedWriteSyncer).Write;os.(*File).Write",
    "go.uber.org/zap.(*Logger).Info;go.uber.org/zap/zapcore.(*CheckedEntry).Write",
    "github.com/prometheus/client_golang/prometheus.(*HistogramVec).WithLabelValues;github.com/prometheus/client_golang/prometheus.(*MetricVec).GetMetricWithLabelValues;github.com/prometheus/client_golang/prometheus.(*metricMap).getOrCreateMetricWithLabelValues;github.com/prometheus/client_golang/prometheus.hashAdd",
    "github.com/prometheus/client_golang/prometheus.(*MetricVec).GetMetricWithLabelValues;github.com/prometheus/client_golang/prometheus.(*MetricVec).hashLabelValues;github.com/prometheus/client_golang/prometheus.hashAdd",
    "github.com/prometheus/client_golang/prometheus.(*histogram).Observe;github.com/prometheus/client_golang/prometheus.(*histogram).findBucket;sort.SearchFloat64s",
    "github.com/prometheus/client_golang/prometheus.(*CounterVec).WithLabelValues;github.com/prometheus/client_golang/prometheus.(*MetricVec).GetMetricWithLabelValues",
    "github.com/prometheus/client_golang/prometheus.(*counter).Add",
    "github.com/prometheus/client_golang/prometheus/promhttp.HandlerForTransactional.func1;github.com/prometheus/client_golang/prometheus.(*Registry).Gather;github.com/prometheus/client_golang/prometheus.processMetric;github.com/prometheus/client_golang/prometheus.(*histogram).Write",
    "github.com/prometheus/client_golang/prometheus/promhttp.HandlerForTransactional.func1;github.com/prometheus/common/expfmt.MetricFamilyToText;github.com/prometheus/common/expfmt.writeSample;bufio.(*Writer).WriteString",
    "go.opentelemetry.io/otel/sdk/trace.(*tracer).Start;go.opentelemetry.io/otel/sdk/trace.(*tracer).newSpan;go.opentelemetry.io/otel/sdk/trace.(*randomIDGenerator).NewIDs;math/rand.(*Rand).Int63",
    "go.opentelemetry.io/otel/sdk/trace.(*recordingSpan).End;go.opentelemetry.io/otel/sdk/trace.(*batchSpanProcessor).OnEnd;go.opentelemetry.io/otel/sdk/trace.(*batchSpanProcessor).enqueue",
    "go.opentelemetry.io/otel/sdk/trace.(*recordingSpan).SetAttributes;go.opentelemetry.io/otel/sdk/trace.(*recordingSpan).addOverCapAttrs",
    "go.opentelemetry.io/otel/sdk/trace.(*batchSpanProcessor).processQueue;go.opentelemetry.io/otel/sdk/trace.(*batchSpanProcessor).exportSpans;go.opentelemetry.io/otel/exporters/otlp/otlptrace.(*Exporter).ExportSpans;google.golang.org/grpc.(*ClientConn).Invoke",
    "github.com/segmentio/kafka-go.(*Writer).WriteMessages;github.com/segmentio/kafka-go.(*partitionWriter).writeBatch;github.com/segmentio/kafka-go.(*Conn).WriteCompressedMessages;github.com/segmentio/kafka-go.(*Conn).writeCompressedMessages;github.com/segmentio/kafka-go/compress/snappy.(*Codec).NewWriter",
    "github.com/segmentio/kafka-go.(*Reader).ReadMessage;github.com/segmentio/kafka-go.(*Reader).FetchMessage;runtime.selectgo",
    "github.com/segmentio/kafka-go.(*reader).run;github.com/segmentio/kafka-go.(*reader).read;github.com/segmentio/kafka-go.(*Batch).ReadMessage;github.com/segmentio/kafka-go.(*messageSetReader).readMessage;github.com/klauspost/compress/snappy.Decode",
    "github.com/golang/snappy.Encode;github.com/golang/snappy.encodeBlock;github.com/golang/snappy.emitLiteral",
    "github.com/klauspost/compress/zstd.(*Encoder).EncodeAll;github.com/klauspost/compress/zstd.(*fastEncoder).Encode;github.com/klauspost/compress/zstd.(*fastBase).matchlen",
    "github.com/gorilla/mux.(*Router).ServeHTTP;github.com/gorilla/mux.(*Router).Match;github.com/gorilla/mux.(*Route).Match;github.com/gorilla/mux.(*routeRegexp).Match;regexp.(*Regexp).MatchString",
    "github.com/aws/aws-sdk-go-v2/service/s3.(*Client).GetObject;github.com/aws/smithy-go/middleware.decoratedHandler.Handle;github.com/aws/smithy-go/middleware.(*Stack).HandleMiddleware;github.com/aws/aws-sdk-go-v2/aws/signer/v4.(*Signer).SignHTTP;crypto/hmac.(*hmac).Write",
    "github.com/jackc/pgx/v5.(*Conn).Query;github.com/jackc/pgx/v5/pgconn.(*PgConn).ExecParams;github.com/jackc/pgx/v5/pgconn.(*PgConn).flushWithPotentialWriteReadDeadlock;net.(*conn).Write",
    "github.com/jackc/pgx/v5.(*baseRows).Next;github.com/jackc/pgx/v5/pgconn.(*ResultReader).NextRow;github.com/jackc/pgx/v5/pgconn.(*PgConn).receiveMessage;github.com/jackc/pgx/v5/pgproto3.(*Frontend).Receive;github.com/jackc/pgx/v5/internal/iobufpool.Get",
    "github.com/jackc/pgx/v5.(*baseRows).Scan;github.com/jackc/pgx/v5/pgtype.(*Map).PlanScan;github.com/jackc/pgx/v5/pgtype.(*Map).planScan",
    NULL
};

/* Functions that call the app's handlers (HTTP, gRPC, middleware). */
static const char *const dispatchers[] = {
    "net/http.HandlerFunc.ServeHTTP",
    "google.golang.org/grpc.(*Server).processUnaryRPC.func1",
    "github.com/gorilla/mux.(*Router).ServeHTTP",
    "start_thread", "__libc_start_main", NULL
};

/* What app code calls, most popular first. */
static const char *const go_apis[] = {
    "runtime.newobject", "runtime.mallocgc", "runtime.growslice", "runtime.mapaccess2_faststr",
    "runtime.makeslice", "encoding/json.Marshal", "runtime.mapassign_faststr",
    "database/sql.(*DB).QueryContext", "sync.(*Mutex).Lock", "encoding/json.Unmarshal",
    "fmt.Sprintf", "runtime.concatstrings", "database/sql.(*Rows).Next",
    "github.com/redis/go-redis/v9.(*Client).Process", "runtime.memmove", "time.Now",
    "go.uber.org/zap.(*Logger).Info", "strconv.Itoa", "context.WithTimeout",
    "database/sql.(*Rows).Scan", "net/http.(*Client).Do", "runtime.selectgo",
    "github.com/prometheus/client_golang/prometheus.(*HistogramVec).WithLabelValues",
    "sync.(*Mutex).Unlock", "runtime.chansend1", "strings.Split", "bytes.(*Buffer).Write",
    "runtime.mapiternext", "sort.Slice", "google.golang.org/grpc.(*ClientConn).Invoke",
    "go.opentelemetry.io/otel/sdk/trace.(*tracer).Start", "runtime.convTstring",
    "strings.(*Builder).WriteString", "go.uber.org/zap/zapcore.(*CheckedEntry).Write",
    "net/http.(*response).Write", "regexp.(*Regexp).MatchString", "database/sql.(*DB).ExecContext",
    "crypto/sha256.Sum256", "compress/gzip.(*Writer).Write", "strconv.ParseInt",
    "reflect.Value.Field", "time.Time.Format", "sync.(*RWMutex).RLock", "runtime.slicebytetostring",
    "github.com/prometheus/client_golang/prometheus.(*histogram).Observe",
    "go.opentelemetry.io/otel/sdk/trace.(*recordingSpan).End", "strings.ToLower",
    "html/template.(*Template).Execute", "encoding/json.(*Encoder).Encode", "sync.(*Pool).Get",
    "github.com/segmentio/kafka-go.(*Writer).WriteMessages", "io.ReadAll", "strconv.ParseFloat",
    "encoding/base64.(*Encoding).EncodeToString", "crypto/hmac.(*hmac).Write", "runtime.deferreturn",
    "github.com/jackc/pgx/v5.(*Conn).Query", "github.com/jackc/pgx/v5.(*baseRows).Next",
    "time.Since", "strings.Index", "runtime.assertE2I2", "hash/crc32.ChecksumIEEE",
    "github.com/golang/snappy.Encode", "github.com/klauspost/compress/zstd.(*Encoder).EncodeAll",
    "os.ReadFile", "fmt.Errorf", "unicode/utf8.RuneCountInString", "math/big.(*Int).Exp",
    "github.com/aws/aws-sdk-go-v2/service/s3.(*Client).GetObject", "crypto/rand.Read",
    "sync.(*WaitGroup).Wait", "strings.TrimSpace", "reflect.DeepEqual", "encoding/hex.EncodeToString",
    NULL
};

static const char *const c_apis[] = {
    "__memmove_avx_unaligned_erms", "malloc", "free", "__GI___pthread_mutex_lock",
    "__libc_write", "__libc_read", "__GI___writev", "__strlen_avx2", "__memcmp_avx2_movbe",
    "epoll_wait", "__GI___clock_gettime", "__libc_recv", "__GI___pthread_mutex_unlock",
    "__memset_avx2_unaligned_erms", "__libc_sendmsg", "__strcmp_avx2", "__snprintf",
    "__GI___qsort_r", "__memchr_avx2", "pthread_cond_wait@@GLIBC_2.3.2", "__sendfile",
    "__GI___ioctl", NULL
};

/* Generated library functions: more packages in the Go naming style. */
static const char *const lib_pkgs[] = {
    "github.com/gin-gonic/gin", "github.com/json-iterator/go", "github.com/go-playground/validator/v10",
    "github.com/spf13/viper", "github.com/hashicorp/golang-lru/v2", "github.com/google/uuid",
    "github.com/Shopify/sarama", "github.com/nats-io/nats.go", "github.com/elastic/go-elasticsearch/v8",
    "go.mongodb.org/mongo-driver/mongo", "go.mongodb.org/mongo-driver/bson", "github.com/rs/zerolog",
    "github.com/sirupsen/logrus", "github.com/tidwall/gjson", "github.com/valyala/fasthttp",
    "github.com/dgraph-io/ristretto", "github.com/cespare/xxhash/v2", "k8s.io/apimachinery/pkg/util/wait",
    "k8s.io/client-go/tools/cache", "github.com/golang-jwt/jwt/v5", "github.com/mitchellh/mapstructure",
    "gopkg.in/yaml.v3", "github.com/pelletier/go-toml/v2", "github.com/stretchr/objx",
    NULL
};

static const char *const types_w[] = {
    "Order", "Cart", "User", "Session", "Item", "Invoice", "Payment", "Account", "Product",
    "Inventory", "Shipment", "Query", "Batch", "Event", "Token", "Cache", "Pool", "Client",
    "Repo", "Store", "Handler", "Server", "Worker", "Processor", "Manager", "Builder",
    "Encoder", "Decoder", "Index", "Router", "Limiter", "Tracker", "Ledger", "Quote",
    "Price", "Rule", "Policy", "Schema", "Record", "Stream", "Buffer", "Reader", "Writer",
    "Consumer", "Producer", "Scheduler", "Resolver", "Validator", "Registry", "Snapshot",
    NULL
};

static const char *const verbs_w[] = {
    "Get", "Load", "Save", "Update", "Validate", "Compute", "Apply", "Handle", "Process",
    "Fetch", "Encode", "Decode", "Parse", "Render", "Build", "Resolve", "Lookup", "Insert",
    "Delete", "Merge", "Filter", "Sort", "Scan", "Flush", "Publish", "Subscribe", "Refresh",
    "Check", "Authorize", "Marshal", "Unmarshal", "Convert", "Normalize", "Aggregate",
    "Enqueue", "Dequeue", "Dispatch", "Serialize", "Collect", "Evict", "Reserve", "Release",
    NULL
};

static const char *const app_pkgs[] = {
    "handlers", "service", "store", "cache", "model", "client", "auth", "metrics", "config",
    "queue", "pricing", "search", "billing", "events", "middleware", "repository", "domain",
    "transport", "util", "worker", NULL
};

static const char *const c_modules[] = {
    "http", "event", "conn", "buf", "pool", "hash", "queue", "log", "ssl", "upstream",
    "cache", "proto", "parse", "timer", "shm", "core", NULL
};

static const char *const c_words[] = {
    "process", "read", "write", "handler", "request", "response", "header", "body", "line",
    "init", "free", "alloc", "lookup", "insert", "expire", "send", "recv", "chain", "filter",
    "finalize", "handshake", "flush", "copy", "update", "event", "timer", "close", NULL
};

static const char *const service_w[] = {
    "api", "checkout", "cart", "payments", "search", "auth", "inventory", "shipping",
    "users", "recommendations", "gateway", "notifications", "orders", "pricing",
    "catalog", "ledger", "frontend", "ads", "email", "currency", "reviews", "fraud",
    "loyalty", "media", "profiles", "sessions", "billing", "reports", "indexer", "geo",
    NULL
};

static const char *const service_suffix[] = {
    "worker", "api", "consumer", "sync", "cron", "proxy", "batch", "stream", "admin",
    "export", "import", "cache", NULL
};

static size_t nstr(const char *const *list)
{
    size_t n = 0;
    while (list[n] != NULL)
        n++;
    return n;
}

static const char *pick(const char *const *list, gen_rng *r)
{
    return list[gen_rng_below(r, nstr(list))];
}

/* ---- shared functions -------------------------------------------------------- */

/* Go file of a function name: the package path, then a file in it. */
static const char *go_file(gen *g, const char *name)
{
    const char *slash = strrchr(name, '/');
    const char *dot = strchr(slash != NULL ? slash : name, '.');
    size_t pkglen = dot != NULL ? (size_t)(dot - name) : strlen(name);
    const char *last = slash != NULL ? slash + 1 : name;
    size_t lastlen = (size_t)(name + pkglen - last);
    const char *first_dot = memchr(name, '.', pkglen);
    const char *root = first_dot != NULL && first_dot < (slash ? slash : name + pkglen)
        ? "/go/pkg/mod/" : "/usr/local/go/src/";

    return gen_printf(g, "%s%.*s/%.*s.go", root, (int)pkglen, name,
                      (int)lastlen, last);
}

static int infer_tier(const char *name, int deflt)
{
    if (strncmp(name, "runtime.", 8) == 0 || strncmp(name, "runtime/", 8) == 0)
        return T_RUNTIME;
    return deflt;
}

static uint32_t shared_func(gen *g, const char *name, int tier)
{
    uint32_t f = gen_func_find(g, name);
    const char *file = "";
    int64_t line = 0;

    if (f != UINT32_MAX)
        return f;
    tier = infer_tier(name, tier);
    if (tier == T_RUNTIME || tier == T_LIB) {
        file = go_file(g, name);
        line = 20 + (int64_t)(gen_hash(name, strlen(name), 7) % 1400);
    }
    return gen_func_add(g, name, file, line, tier, 0xffff);
}

/* Adds the edges of every "a;b;c" path of LIST, creating functions. */
static void add_paths(gen *g, const char *const *list, int tier)
{
    char buf[4096];

    for (size_t i = 0; list[i] != NULL; i++) {
        uint32_t prev = UINT32_MAX;
        snprintf(buf, sizeof buf, "%s", list[i]);
        for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok != NULL;
             tok = strtok_r(NULL, ";", &save)) {
            uint32_t f = shared_func(g, tok, tier);
            if (prev != UINT32_MAX)
                gen_edge_add(g, prev, f);
            prev = f;
        }
    }
}

static void mark(gen *g, const char *const *list, int flag)
{
    for (size_t i = 0; list[i] != NULL; i++) {
        uint32_t f = gen_func_find(g, list[i]);
        if (f != UINT32_MAX)
            g->funcs[f].flags |= (uint8_t)flag;
    }
}

/* Extra library functions: per package a few types and methods calling
** each other and into the hand-written libraries and the runtime. */
static void gen_lib_extras(gen *g, gen_rng *r)
{
    size_t npkgs = nstr(lib_pkgs);

    for (size_t p = 0; p < npkgs; p++) {
        uint32_t first = g->nfuncs, n = 16 + (uint32_t)gen_rng_below(r, 24);
        for (uint32_t i = 0; i < n; i++) {
            const char *name;
            if (gen_rng_below(r, 3) == 0)
                name = gen_printf(g, "%s.%s%s", lib_pkgs[p], pick(verbs_w, r),
                                  pick(types_w, r));
            else
                name = gen_printf(g, "%s.(*%s).%s", lib_pkgs[p], pick(types_w, r),
                                  pick(verbs_w, r));
            if (gen_func_find(g, name) == UINT32_MAX)
                shared_func(g, name, T_LIB);
        }
        for (uint32_t f = first; f < g->nfuncs; f++) {
            uint32_t nc = (uint32_t)gen_rng_below(r, 4), after = g->nfuncs - f - 1;
            for (uint32_t k = 0; k < nc; k++) {
                if (after > 0 && gen_rng_below(r, 2) == 0)     /* same package */
                    gen_edge_add(g, f, f + 1 + (uint32_t)gen_rng_below(r, after < 6 ? after : 6));
                else                                            /* popular APIs */
                    gen_edge_add(g, f, g->apis[gen_rng_below(r, g->napis < 12 ? g->napis : 12)]);
            }
        }
        /* the package's first functions are APIs for app code */
        for (uint32_t f = first; f < first + 3 && f < g->nfuncs; f++) {
            g->apis = gen_xrealloc(g->apis, (g->napis + 1) * sizeof *g->apis);
            g->apis[g->napis++] = f;
        }
    }
}

static void list_funcs(gen *g, const char *const *names, uint32_t **out,
                       uint32_t *n)
{
    size_t cnt = nstr(names);
    *out = gen_xmalloc(cnt * sizeof **out);
    *n = 0;
    for (size_t i = 0; i < cnt; i++) {
        uint32_t f = gen_func_find(g, names[i]);
        if (f != UINT32_MAX) {
            (*out)[(*n)++] = f;
            g->funcs[f].flags |= GF_APIS;
        }
    }
}

/* Which system call a user-space function makes ("caller;syscall"), so
** that a walk through the kernel entry goes to the right __x64_sys_*. */
static const char *const syscalls[] = {
    "runtime.usleep;__x64_sys_nanosleep", "runtime.futex;__x64_sys_futex",
    "runtime.epollwait;__x64_sys_epoll_wait", "runtime.write1;__x64_sys_write",
    "runtime.madvise;__x64_sys_madvise", "runtime.tgkill;__x64_sys_tgkill",
    "runtime.osyield;__x64_sys_sched_yield", "__libc_write;__x64_sys_write",
    "__libc_read;__x64_sys_read", "__GI___writev;__x64_sys_writev",
    "__libc_sendmsg;__x64_sys_sendmsg", "__libc_recv;__x64_sys_recvfrom",
    "epoll_wait;__x64_sys_epoll_wait", "__brk;__x64_sys_mmap",
    "futex_wait;__x64_sys_futex", "__lll_lock_wake;__x64_sys_futex",
    "__futex_abstimed_wait_common;__x64_sys_futex", "__sendfile;__x64_sys_writev",
    NULL
};

static void link_syscalls(gen *g)
{
    char buf[128];

    for (size_t i = 0; syscalls[i] != NULL; i++) {
        char *semi;
        uint32_t caller, sys;
        snprintf(buf, sizeof buf, "%s", syscalls[i]);
        semi = strchr(buf, ';');
        *semi = '\0';
        caller = gen_func_find(g, buf);
        sys = gen_func_find(g, semi + 1);
        if (caller != UINT32_MAX && sys != UINT32_MAX)
            g->funcs[caller].sys = sys;
    }
    g->sys_entry = gen_func_find(g, "entry_SYSCALL_64_after_hwframe");
    g->sys_do = gen_func_find(g, "do_syscall_64");
    g->sys_exit = gen_func_find(g, "syscall_exit_to_user_mode");
}

void gen_names_shared(gen *g)
{
    gen_rng r;
    static const char *const recursive[] = {
        "encoding/json.structEncoder.encode", "encoding/json.(*decodeState).value",
        "sort.pdqsort_func", "text/template.(*state).walk", "reflect.deepValueEqual",
        "regexp.(*machine).add", "msort_with_tmp.part.0", NULL
    };

    gen_rng_seed(&r, g->cfg.seed ^ 0x5eed5eedULL);
    add_paths(g, kernel_paths, T_KERNEL);
    add_paths(g, libc_paths, T_LIBC);
    add_paths(g, go_paths, T_LIB);
    mark(g, dispatchers, GF_DISPATCH);
    mark(g, recursive, GF_RECURSIVE);
    list_funcs(g, go_apis, &g->apis, &g->napis);
    list_funcs(g, c_apis, &g->libc_apis, &g->nlibc_apis);
    shared_func(g, "_start", T_ENTRY);
    shared_func(g, "clone3", T_ENTRY);
    gen_edge_add(g, shared_func(g, "_start", T_ENTRY),
                 shared_func(g, "__libc_start_main", T_LIBC));
    gen_edge_add(g, shared_func(g, "clone3", T_ENTRY),
                 shared_func(g, "start_thread", T_LIBC));
    gen_lib_extras(g, &r);
    link_syscalls(g);
}

/* ---- app functions ----------------------------------------------------------- */

static const char *go_app_name(gen *g, const gprog *p, uint32_t i, gen_rng *r,
                               const char **file)
{
    const char *pkg = i < GEN_APP_ENTRIES
        ? (gen_rng_below(r, 3) == 0 ? "worker" : "handlers") : pick(app_pkgs, r);
    const char *type = pick(types_w, r), *verb = pick(verbs_w, r);
    const char *noun = pick(types_w, r);
    char lower[32];
    size_t k;

    for (k = 0; type[k] != '\0' && k + 1 < sizeof lower; k++)
        lower[k] = (char)(type[k] | 0x20);
    lower[k] = '\0';
    *file = gen_printf(g, "/src/%s/internal/%s/%s.go", p->name, pkg, lower);
    switch (gen_rng_below(r, 6)) {
    case 0:
        return gen_printf(g, "github.com/acme/%s/internal/%s.%s%s", p->name, pkg,
                          verb, noun);
    case 1:
        return gen_printf(g, "github.com/acme/%s/internal/%s.(*%s).%s%s.func%u",
                          p->name, pkg, type, verb, noun,
                          1 + (unsigned)gen_rng_below(r, 3));
    case 2:
        return gen_printf(g, "github.com/acme/%s/internal/%s.%s.%s%s", p->name,
                          pkg, type, verb, noun);
    default:
        return gen_printf(g, "github.com/acme/%s/internal/%s.(*%s).%s%s", p->name,
                          pkg, type, verb, noun);
    }
}

static const char *c_app_name(gen *g, const gprog *p, gen_rng *r,
                              const char **file)
{
    const char *mod = pick(c_modules, r);
    char pfx[4] = { p->name[0], p->name[1] ? p->name[1] : 'x',
                    p->name[1] && p->name[2] ? p->name[2] : 'x', 0 };

    *file = gen_printf(g, "src/%s/%s_%s.c", mod, pfx, mod);
    if (gen_rng_below(r, 2) == 0)
        return gen_printf(g, "%s_%s_%s_%s", pfx, mod, pick(c_words, r),
                          pick(c_words, r));
    return gen_printf(g, "%s_%s_%s", pfx, mod, pick(c_words, r));
}

static const char *const http_mw[] = {
    "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp.(*Handler).ServeHTTP",
    "github.com/acme/%s/internal/middleware.Recover.func1",
    "github.com/acme/%s/internal/middleware.Logging.func1",
    "github.com/acme/%s/internal/middleware.Metrics.func1",
    "github.com/acme/%s/internal/middleware.Auth.func1",
    "github.com/acme/%s/internal/middleware.RateLimit.func1",
    "github.com/acme/%s/internal/middleware.Timeout.func1",
    "github.com/gorilla/mux.(*Router).ServeHTTP", NULL
};

static const char *const grpc_mw[] = {
    "google.golang.org/grpc.chainUnaryInterceptors.func1",
    "go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc.UnaryServerInterceptor.func1",
    "google.golang.org/grpc.getChainUnaryHandler.func1",
    "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging.UnaryServerInterceptor.func1",
    "google.golang.org/grpc.getChainUnaryHandler.func1",
    "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery.UnaryServerInterceptor.func1",
    "google.golang.org/grpc.getChainUnaryHandler.func1",
    "github.com/acme/%s/internal/grpcserver.AuthInterceptor", NULL
};

/* Middleware chain of program P: a random subset of LIST, in order, each
** HTTP layer followed by net/http.HandlerFunc.ServeHTTP as in real stacks. */
static uint32_t middleware(gen *g, gprog *p, gen_rng *r, const char *const *list,
                           bool http, uint32_t *out)
{
    uint16_t prog = (uint16_t)(p - g->progs);
    uint32_t n = 0, hf = gen_func_find(g, "net/http.HandlerFunc.ServeHTTP");

    for (size_t i = 0; list[i] != NULL; i++) {
        const char *hole = strstr(list[i], "%s");
        if (gen_rng_below(r, 10) < 3)
            continue;
        if (hole != NULL)
            out[n++] = gen_func_add(g, gen_printf(g, "%.*s%s%s", (int)(hole - list[i]),
                                                  list[i], p->name, hole + 2),
                                    gen_printf(g, "/src/%s/internal/middleware/mw.go",
                                               p->name),
                                    20 + (int64_t)gen_rng_below(r, 200), T_APP, prog);
        else
            out[n++] = shared_func(g, list[i], T_LIB);
        if (http)
            out[n++] = hf;
    }
    return n;
}

/* The app tier of program P: main at app0, GEN_APP_ENTRIES handlers, then
** the rest; each calls deeper app functions and library APIs. The app
** functions form a tree (each below the entries has one parent among the
** 30 before it) with a few extra calls across it: real programs reach a
** function along a few paths (bench/focus_pages.py: a median of 4 on the
** Go corpus, 13 on its perf stacks; 23 when every call went anywhere in
** the next 30), which is what lets a focus read few pages of a block. */
void gen_names_app(gen *g, gprog *p, gen_rng *r)
{
    uint32_t n = g->cfg.app_functions;
    uint16_t prog = (uint16_t)(p - g->progs);

    p->app0 = g->nfuncs;
    for (uint32_t i = 0; i < n; i++) {
        const char *file, *name;
        if (i == 0) {
            name = p->c ? "main" : "main.main";
            file = gen_printf(g, "/src/%s/%s", p->name, p->c ? "src/main.c" : "main.go");
        } else if (p->c) {
            name = c_app_name(g, p, r, &file);
        } else {
            name = go_app_name(g, p, i, r, &file);
        }
        gen_func_add(g, name, file, 10 + (int64_t)gen_rng_below(r, 900), T_APP, prog);
    }
    p->napp = n;
    if (!p->c) {
        p->nmw_http = middleware(g, p, r, http_mw, true, p->mw_http);
        p->nmw_grpc = middleware(g, p, r, grpc_mw, false, p->mw_grpc);
    }
    for (uint32_t j = GEN_APP_ENTRIES + 1; j < n; j++) {
        uint32_t lo = j > 31 ? j - 30 : 1;
        gen_edge_add(g, p->app0 + lo + (uint32_t)gen_rng_below(r, j - lo), p->app0 + j);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = p->app0 + i, nc = 1 + (uint32_t)gen_rng_below(r, 5);
        if (i > 0 && gen_rng_below(r, 33) == 0) {
            g->funcs[f].flags |= GF_RECURSIVE;
            gen_edge_add(g, f, f);
        }
        for (uint32_t k = 0; k < nc; k++) {
            uint32_t lo = i < GEN_APP_ENTRIES + 1 ? GEN_APP_ENTRIES + 1 : i + 1;
            bool app = lo < n && (i == 0 || gen_rng_below(r, 100) < 20);
            if (app) {
                uint32_t span = i == 0 ? GEN_APP_ENTRIES : (n - lo < 30 ? n - lo : 30);
                gen_edge_add(g, f, (i == 0 ? p->app0 + 1 : p->app0 + lo) +
                                       (uint32_t)gen_rng_below(r, span));
            } else if (p->c) {
                double u = gen_rng_unit(r);
                gen_edge_add(g, f, g->libc_apis[(uint32_t)(u * u * g->nlibc_apis)]);
            } else {
                double u = gen_rng_unit(r);
                gen_edge_add(g, f, g->apis[(uint32_t)(u * u * u * g->napis)]);
            }
        }
    }
}

/* ---- services and labels ------------------------------------------------------ */

const char *gen_names_service(gen *g, uint32_t s)
{
    size_t n = nstr(service_w), m = nstr(service_suffix);

    if (s < n)
        return service_w[s];
    if (s < n + n * m)
        return gen_printf(g, "%s-%s", service_w[(s - n) % n],
                          service_suffix[(s - n) / n]);
    return gen_printf(g, "%s-%zu", service_w[s % n], s / n);
}

static const char *const regions[] = {
    "us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1",
    "ap-northeast-1", NULL
};

/* Labels of target T (index INDEX), sorted by name. */
void gen_names_labels(gen *g, gtarget *t, uint32_t index, gen_rng *r)
{
    static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
    const char *svc = g->service_names[t->service];
    uint64_t hs = gen_hash(svc, strlen(svc), 11);
    uint32_t nnodes = g->ntargets / 6 > 3 ? g->ntargets / 6 : 3;
    uint32_t node = (uint32_t)(gen_hash(&index, sizeof index, 3) % nnodes);
    uint32_t reg = node % 6, version = (uint32_t)gen_rng_below(r, 2);
    uint32_t nsr = (uint32_t)gen_rng_below(r, 20);
    char pod[8];

    for (int i = 0; i < 5; i++)
        pod[i] = alnum[gen_rng_below(r, sizeof alnum - 1)];
    pod[5] = '\0';
    t->labels[0] = (ember_label){ "container", svc };
    t->labels[1] = (ember_label){ "namespace",
        nsr < 14 ? "prod" : nsr < 17 ? "staging" : nsr < 19 ? "canary" : "dev" };
    t->labels[2] = (ember_label){ "node", gen_printf(g,
        "ip-10-%u-%u-%u.%s.compute.internal", (node >> 16) & 255, (node >> 8) & 255,
        node & 255, regions[reg]) };
    t->labels[3] = (ember_label){ "pod", gen_printf(g, "%s-%08llx%u-%s", svc,
        (unsigned long long)((hs >> 8) & 0xffffffffu), version, pod) };
    t->labels[4] = (ember_label){ "region", regions[reg] };
    t->labels[5] = (ember_label){ "service", svc };
    t->labels[6] = (ember_label){ "version", gen_printf(g, "v1.%u.%u",
        (unsigned)(hs % 40), (unsigned)((hs >> 20) % 10 + version)) };
    t->labels[7] = (ember_label){ "zone", gen_printf(g, "%s%c", regions[reg],
        'a' + (char)(node / 6 % 3)) };
}

/* ---- scenarios: how stacks start ---------------------------------------------- */

static const struct scen {
    const char *chain;
    double w;
} go_scen[] = {
    { "runtime.goexit;net/http.(*conn).serve", 30 },
    { "runtime.goexit;google.golang.org/grpc.(*Server).serveStreams.func1.2", 16 },
    { "runtime.goexit;@", 15 },
    { "runtime.goexit;runtime.gcBgMarkWorker", 11 },
    { "runtime.mcall", 7 },
    { "runtime.main;@main", 3 },
    { "runtime.goexit;net/http.(*persistConn).readLoop", 4 },
    { "runtime.goexit;net/http.(*persistConn).writeLoop", 2 },
    { "runtime.goexit;google.golang.org/grpc/internal/transport.newHTTP2Server.func2", 4 },
    { "runtime.goexit;google.golang.org/grpc/internal/transport.(*http2Server).HandleStreams", 3 },
    { "runtime.mstart;runtime.mstart0;runtime.mstart1;runtime.sysmon", 2 },
    { "runtime.goexit;runtime.bgsweep", 2 },
    { "runtime.goexit;runtime.bgscavenge", 1 },
    { "runtime.goexit;go.opentelemetry.io/otel/sdk/trace.(*batchSpanProcessor).processQueue", 1 },
    { NULL, 0 }
}, c_scen[] = {
    { "_start;__libc_start_main;@main", 55 },
    { "clone3;start_thread;@", 45 },
    { NULL, 0 }
};

const char *gen_names_scenario(bool c, int i, double *weight)
{
    const struct scen *s = c ? c_scen : go_scen;

    for (int k = 0; k < i; k++)
        if (s[k].chain == NULL)
            return NULL;
    *weight = s[i].w;
    return s[i].chain;
}
