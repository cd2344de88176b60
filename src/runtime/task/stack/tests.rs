use super::*;

/// The first slab of the default class stays below one 2 MiB
/// page-table page (see `FIRST_SLAB_BYTES`), small classes keep
/// `FIRST_SLAB_STACKS`, and every class still grows geometrically to
/// the cap.
#[test]
fn first_slabs_stay_below_a_page_table_page() {
    let page = os::page_size();
    for usable in [MIN_STACK_SIZE, 64 << 10, DEFAULT_STACK_SIZE, 1 << 20, 8 << 20] {
        let stride = usable + page;
        let first = slab_stacks(0, usable, stride);
        assert!(first >= 1);
        if usable <= FIRST_SLAB_BYTES {
            assert!(first * usable <= FIRST_SLAB_BYTES, "{usable}: {first} stacks");
        } else {
            assert_eq!(first, 1);
        }
        assert!(first <= FIRST_SLAB_STACKS);
        assert_eq!(slab_stacks(1, usable, stride), 2 * first);
        assert_eq!(slab_stacks(30, usable, stride), (MAX_SLAB_BYTES / stride).max(1));
    }
    assert_eq!(slab_stacks(0, MIN_STACK_SIZE, MIN_STACK_SIZE + page), FIRST_SLAB_STACKS);
    let d = slab_stacks(0, DEFAULT_STACK_SIZE, DEFAULT_STACK_SIZE + page);
    assert_eq!(d, 4);
    assert!(d * (DEFAULT_STACK_SIZE + page) < 2 << 20);
}

/// A one-way flow of stacks (taken from pool `a`, given back to pool
/// `b`, as when fibers start on one worker and finish on another) goes
/// through the spill: `b` keeps at most `WARM_POOL` warm, and `a` gets
/// its next stacks from the spill instead of carving new ones.
#[test]
fn a_one_way_flow_goes_through_the_spill() {
    let cfg = Stacks::new(StackMode::Guarded, 2);
    if cfg.guard != GuardKind::Install {
        // The fallback does not spill (own mappings, budgeted).
        return;
    }
    let (mut a, mut b) = (StackPool::new(None), StackPool::new(None));
    let n = 3 * WARM_POOL;
    let stacks: Vec<_> = (0..n).map(|_| a.get(MIN_STACK_SIZE, &cfg).expect("carve")).collect();
    assert_eq!(a.mapped, n as u64);
    for s in stacks {
        assert!(!b.put(s, &cfg));
    }
    let (idx, _) = class_of(MIN_STACK_SIZE).expect("class");
    assert!(b.classes[idx].warm <= WARM_POOL, "pool b keeps {} warm", b.classes[idx].warm);
    let (warm, cold) = cfg.spilled();
    assert_eq!(warm + cold + b.classes[idx].free.len(), n, "every stack is in b or in the spill");
    // 4 batches spilled (at puts 257, 385, 513 and 641): the first two
    // fill the spill's warm part, the other two are given back whole.
    assert_eq!((warm, cold, b.classes[idx].free.len()), (WARM_POOL, 2 * SPILL_BATCH, n - 4 * SPILL_BATCH));
    // Pool a has no free stack: it takes spilled ones, carving none.
    let before = cfg.spilled();
    let s = a.get(MIN_STACK_SIZE, &cfg).expect("from the spill");
    assert_eq!(a.mapped, n as u64, "no new stack carved");
    let after = cfg.spilled();
    assert_eq!(before.0 + before.1 - (after.0 + after.1), SPILL_BATCH, "one batch moved");
    assert_eq!(after, (WARM_POOL - SPILL_BATCH, 2 * SPILL_BATCH), "warm ones first");
    assert!(!a.put(s, &cfg));
}

/// The idle trim gives back pages below the warm top only where a fiber
/// touched them, and then they are gone.
#[test]
fn the_idle_trim_discards_deep_pages_only_where_touched() {
    let cfg = Stacks::new(StackMode::Guarded, 1);
    let mut pool = StackPool::new(None);
    let mut s = pool.get(DEFAULT_STACK_SIZE, &cfg).expect("stack");
    let below = s.usable() - WARM_TOP;
    assert!(!os::any_resident(s.lo, below), "a fresh stack has no pages");
    // SAFETY: our stack, not used by any coroutine.
    unsafe { ((s.lo + os::page_size()) as *mut u8).write_volatile(1) };
    assert!(os::any_resident(s.lo, below));
    assert!(!os::any_resident(s.lo + 2 * os::page_size(), below - 2 * os::page_size()));
    s.dirty = true;
    s.trim_below_warm_top();
    assert!(!s.dirty);
    assert!(!os::any_resident(s.lo, below), "trimmed");
    // SAFETY: as above; the page reads back as zero after the discard.
    assert_eq!(unsafe { ((s.lo + os::page_size()) as *const u8).read_volatile() }, 0);
    assert!(!pool.put(s, &cfg));
}
