package botrunner

import (
	"sync"
	"time"
)

// Bot runtimes, as Medplum names them (Bot.runtimeVersion).
const (
	// RuntimeAWSLambda keeps warm instances: the module's top level runs once per instance and
	// each run calls its handler, so module state may carry from run to run of one bot version,
	// as in a warm AWS Lambda container.
	RuntimeAWSLambda = "awslambda"
	// RuntimeVMContext builds a fresh runtime for every run, as Medplum's vm.runInNewContext.
	RuntimeVMContext = "vmcontext"
	// DefaultRuntime is the runtime of a Request without one, as Medplum's
	// defaultBotRuntimeVersion.
	DefaultRuntime = RuntimeAWSLambda
)

// Defaults of the warm-instance bounds (Options.MaxInstances, MaxInstancesPerVersion,
// InstanceIdleTimeout).
const (
	DefaultMaxInstances           = 256
	DefaultMaxInstancesPerVersion = 8
	DefaultInstanceIdleTimeout    = 5 * time.Minute
)

// instancePool keeps the idle warm instances (executions whose runtime has the bot's module
// loaded) of awslambda runs. An instance is taken by one run at a time and put back when that
// run ended cleanly; anything else discards it.
type instancePool struct {
	maxTotal, maxPerKey int
	idleTimeout         time.Duration

	mu      sync.Mutex
	sets    map[string]*instanceSet // by instance key
	current map[string]string       // bot key → the instance key of its newest version seen
	total   int                     // idle instances in all sets
	busy    int                     // instances taken by get and not yet back
	reaping bool
}

// instanceSet holds the idle instances of one bot version, all running code.
type instanceSet struct {
	bot  string
	code string
	idle []*execution // most recently used last
}

func newInstancePool(o Options) *instancePool {
	return &instancePool{
		maxTotal:    o.MaxInstances,
		maxPerKey:   o.MaxInstancesPerVersion,
		idleTimeout: o.InstanceIdleTimeout,
		sets:        map[string]*instanceSet{},
		current:     map[string]string{},
	}
}

// instanceKeys names the instances a request may use: key is the bot version (project, bot and
// cache key), bot the bot (project and bot). Empty when the request does not name its code: such
// a run gets a fresh runtime whatever its runtime.
func instanceKeys(req *Request) (key, bot string) {
	if req.instanceKey != "" {
		return req.instanceKey, req.instanceBot
	}
	if req.CacheKey == "" {
		return "", ""
	}
	bot = req.Project + "\x00" + req.BotID
	return bot + "\x00" + req.CacheKey, bot
}

// get takes an idle instance of key running code, or returns nil. A key seen with new code, or
// a bot seen with a new version, retires the idle instances of the old one. (Comparing code is
// cheap: the cached code of a version shares its memory from run to run.)
func (p *instancePool) get(key, bot, code string) *execution {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.current[bot]; ok && old != key {
		p.dropSet(old)
	}
	p.current[bot] = key
	set := p.sets[key]
	if set == nil {
		return nil
	}
	if set.code != code {
		p.dropSet(key)
		return nil
	}
	n := len(set.idle)
	if n == 0 {
		return nil
	}
	x := set.idle[n-1]
	set.idle[n-1] = nil
	set.idle = set.idle[:n-1]
	p.total--
	p.busy++
	x.pooled = true
	if len(set.idle) == 0 {
		delete(p.sets, key)
	}
	return x
}

// put keeps x, whose last run of code ended cleanly, for the next run of key; it reports false
// when x is not kept (its version was retired or its set is full), and the caller drops it.
func (p *instancePool) put(key, bot, code string, x *execution) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.current[bot]; ok && cur != key {
		return false
	}
	p.current[bot] = key
	set := p.sets[key]
	if set == nil {
		set = &instanceSet{bot: bot, code: code}
		p.sets[key] = set
	}
	if set.code != code || len(set.idle) >= p.maxPerKey {
		if len(set.idle) == 0 {
			delete(p.sets, key)
		}
		return false
	}
	if p.total >= p.maxTotal && !p.evictOldest() {
		if len(set.idle) == 0 {
			delete(p.sets, key)
		}
		return false
	}
	x.lastUsed = time.Now()
	set.idle = append(set.idle, x)
	p.total++
	if !p.reaping {
		p.reaping = true
		go p.reap()
	}
	return true
}

// dropSet discards the idle instances of key. p.mu is held.
func (p *instancePool) dropSet(key string) {
	set := p.sets[key]
	if set == nil {
		return
	}
	for _, x := range set.idle {
		x.drop()
	}
	p.total -= len(set.idle)
	delete(p.sets, key)
}

// evictOldest discards the least recently used idle instance. p.mu is held.
func (p *instancePool) evictOldest() bool {
	var oldestKey string
	var oldest *execution
	for k, set := range p.sets {
		if len(set.idle) > 0 && (oldest == nil || set.idle[0].lastUsed.Before(oldest.lastUsed)) {
			oldestKey, oldest = k, set.idle[0]
		}
	}
	if oldest == nil {
		return false
	}
	set := p.sets[oldestKey]
	set.idle = append(set.idle[:0], set.idle[1:]...)
	p.total--
	if len(set.idle) == 0 {
		delete(p.sets, oldestKey)
	}
	oldest.drop()
	return true
}

// reap discards instances idle for idleTimeout, until none is left.
func (p *instancePool) reap() {
	every := max(p.idleTimeout/4, time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for range tick.C {
		p.mu.Lock()
		cutoff := time.Now().Add(-p.idleTimeout)
		for k, set := range p.sets {
			n := 0
			for n < len(set.idle) && set.idle[n].lastUsed.Before(cutoff) {
				set.idle[n].drop()
				n++
			}
			if n > 0 {
				set.idle = append(set.idle[:0], set.idle[n:]...)
				p.total -= n
			}
			if len(set.idle) == 0 {
				delete(p.sets, k)
			}
		}
		for bot, key := range p.current {
			if p.sets[key] == nil {
				// Forgetting the newest version is safe: the next run names it again.
				delete(p.current, bot)
			}
		}
		if p.total == 0 {
			p.reaping = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// back ends the run of x, which get may have handed out; put or drop follows.
func (p *instancePool) back(x *execution) {
	if !x.pooled {
		return
	}
	x.pooled = false
	p.mu.Lock()
	p.busy--
	p.mu.Unlock()
}

// held reports whether any warm instance with module state is kept, idle or running.
func (p *instancePool) held() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total+p.busy > 0
}

// dropAll discards every idle instance.
func (p *instancePool) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key := range p.sets {
		p.dropSet(key)
	}
}

// idleCount is the number of idle instances kept.
func (p *instancePool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}
