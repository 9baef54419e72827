package userinfo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// call makes one provider request within ctx (which carries the timeout).
func (c *Client) call(ctx context.Context, u *url.URL, token string, timeout time.Duration) (info *Info, err error) {
	c.calls.Add(1)
	if c.observe != nil {
		start := time.Now()
		defer func() {
			outcome := outcomeOK
			if err != nil {
				outcome = string(KindOf(err))
			}
			c.observe(time.Since(start), outcome)
		}()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &Error{Kind: KindUnavailable, Err: fmt.Errorf("building request: %w", err)}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "fhirgate")

	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &Error{Kind: KindUnavailable, Err: transportError(ctx, u, timeout, err)}
	}
	defer resp.Body.Close()

	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
	case s == http.StatusBadRequest || s == http.StatusUnauthorized || s == http.StatusForbidden:
		discard(resp.Body)
		return nil, &Error{Kind: KindRejected, Status: s, Err: errors.New("provider refused the token")}
	case s == http.StatusTooManyRequests:
		discard(resp.Body)
		return nil, &Error{Kind: KindRateLimited, Status: s, RetryAfter: parseRetryAfter(resp.Header, c.now()),
			Err: errors.New("provider is rate limiting")}
	default:
		discard(resp.Body)
		return nil, &Error{Kind: KindUnavailable, Status: s, RetryAfter: parseRetryAfter(resp.Header, c.now()),
			Err: fmt.Errorf("unexpected status from %s", u.Host)}
	}

	if resp.ContentLength > c.maxBody {
		return nil, &Error{Kind: KindUnavailable, Status: resp.StatusCode,
			Err: fmt.Errorf("body of %d bytes exceeds the %d-byte limit", resp.ContentLength, c.maxBody)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, &Error{Kind: KindUnavailable, Status: resp.StatusCode, Err: readError(ctx, timeout, err)}
	}
	if int64(len(body)) > c.maxBody {
		return nil, &Error{Kind: KindUnavailable, Status: resp.StatusCode,
			Err: fmt.Errorf("body exceeds the %d-byte limit", c.maxBody)}
	}
	claims, err := decodeBody(resp.Header.Get("Content-Type"), body)
	if err != nil {
		return nil, &Error{Kind: KindUnavailable, Status: resp.StatusCode, Err: err}
	}
	return infoFrom(claims), nil
}

// discard reads a little of an unwanted body so the connection can be
// reused, without waiting on a large or slow one.
func discard(body io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
}

func transportError(ctx context.Context, u *url.URL, timeout time.Duration, err error) error {
	switch {
	case errors.Is(err, errOffHostRedirect), errors.Is(err, errTooManyRedirects):
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // our own message, without the URL's query
		}
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("no answer from %s within %v", u.Host, timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("calling %s: %w", u.Host, err)
}

func readError(ctx context.Context, timeout time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("body not received within %v", timeout)
	}
	return fmt.Errorf("reading body: %w", err)
}
