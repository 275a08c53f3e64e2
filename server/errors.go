package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// apiError is an OpenAI error object: {"error": {message, type, param, code}}.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// badRequest is a 400 invalid_request_error about param.
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: strp(param), Message: fmt.Sprintf(format, args...)}
}

func withCode(e *apiError, code string) *apiError {
	e.Code = strp(code)
	return e
}

var (
	errBadKey = &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: strp("invalid_api_key"),
		Message: "Incorrect API key provided: send it as 'Authorization: Bearer KEY'."}
	errOverloaded = &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("server_overloaded"),
		Message: "The server is overloaded: too many requests are waiting. Retry later."}
	errShuttingDown = &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("shutting_down"),
		Message: "The server is shutting down."}
)

// errTooManyConns answers a connection beyond Options.MaxConns.
func errTooManyConns(max int) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("too_many_connections"),
		Message: fmt.Sprintf("The server holds %d connections already (its --max-conns). Retry later.", max)}
}

// errBodyTimeout answers a request whose body did not arrive in time.
func errBodyTimeout(d time.Duration) *apiError {
	return withCode(&apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error",
		Message: fmt.Sprintf("The request body did not arrive within %s (the server's --body-timeout).", d)}, "request_timeout")
}

// errorBody is the JSON object of an error response.
func errorBody(e *apiError) any {
	return struct {
		Error *apiError `json:"error"`
	}{e}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}

func internalError(err error) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// writeError writes e as an OpenAI error response.
func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(errorBody(e))
}

// decodeError turns an encoding/json error into a 400 naming the field.
func decodeError(err error) *apiError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var big *http.MaxBytesError
	switch {
	case errors.As(err, &big):
		return withCode(&apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
			Message: fmt.Sprintf("The request body is larger than %d bytes.", big.Limit)}, "request_too_large")
	case errors.As(err, &syn):
		return badRequest("", "The request body is not valid JSON: %v (at byte %d).", syn, syn.Offset)
	case errors.As(err, &typ):
		field := strings.TrimPrefix(typ.Field, "samplingFields.") // the embedded struct's name
		if field == "" {
			return badRequest("", "The request body must be a JSON object, not %s.", typ.Value)
		}
		return badRequest(field, "Invalid type for '%s': expected %s, got %s.", field, typ.Type, typ.Value)
	case errors.Is(err, errEmptyBody):
		return badRequest("", "The request body is empty: expected a JSON object.")
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return badRequest("", "The request body could not be parsed: %v.", err)
}

var errEmptyBody = errors.New("empty body")
