package botrunner

import "time"

// workerIdle is how long an idle worker goroutine waits for another run before it exits.
const workerIdle = 30 * time.Second

// workerPool runs jobs on long-lived goroutines. goja is stack-hungry, and a fresh goroutine
// grows its stack from 8 KiB on every run; a reused one keeps its grown stack. The number of
// workers never exceeds the number of concurrent runs, which the limiter bounds.
type workerPool struct {
	jobs chan func() // unbuffered: a send succeeds only when a worker is idle
}

func (p *workerPool) submit(job func()) {
	select {
	case p.jobs <- job:
	default:
		go p.work(job)
	}
}

func (p *workerPool) work(job func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job()
		job = nil // what the job captured, a whole runtime, must not outlive it while idle
		idle.Reset(workerIdle)
		select {
		case job = <-p.jobs:
		case <-idle.C:
			return
		}
	}
}
