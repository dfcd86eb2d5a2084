package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
)

// RequireToken serves h to the requests that carry token as their bearer
// token (Authorization: Bearer TOKEN, RFC 6750) and answers the others 401
// with an Error that names the Authorization header, changing nothing. The
// comparison takes the same time whatever the token sent; neither token is
// logged.
func RequireToken(token string, h http.Handler, log *slog.Logger) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, sent, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			refuse(w, r, log, "this API needs a bearer token: Authorization: Bearer TOKEN")
			return
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(sent)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			refuse(w, r, log, "the bearer token is not the daemon's")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func refuse(w http.ResponseWriter, r *http.Request, log *slog.Logger, reason string) {
	log.Warn("REST request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", reason)
	w.Header().Set("WWW-Authenticate", `Bearer realm="xdp5g"`)
	writeJSON(w, http.StatusUnauthorized, &Error{Msg: reason, Field: "Authorization"})
}
