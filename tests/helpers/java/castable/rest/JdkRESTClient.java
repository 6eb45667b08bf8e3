package castable.rest;

import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.iceberg.exceptions.RESTException;
import org.apache.iceberg.rest.BaseHTTPClient;
import org.apache.iceberg.rest.ErrorHandler;
import org.apache.iceberg.rest.HTTPHeaders;
import org.apache.iceberg.rest.HTTPRequest;
import org.apache.iceberg.rest.ImmutableHTTPRequest;
import org.apache.iceberg.rest.ParserContext;
import org.apache.iceberg.rest.RESTClient;
import org.apache.iceberg.rest.RESTResponse;
import org.apache.iceberg.rest.RESTUtil;
import org.apache.iceberg.rest.auth.AuthSession;
import org.apache.iceberg.rest.responses.ErrorResponse;

/**
 * Iceberg's REST client (as org.apache.iceberg.rest.HTTPClient behaves) on java.net.http, for
 * runtime jars without the shaded Apache HttpClient 5 (see JdkRESTCatalog). BaseHTTPClient maps
 * head/get/post/delete onto buildRequest and execute; bodies are encoded and parsed by Iceberg's
 * own mapper (HTTPRequest.encodedBody, HTTPRequest.mapper), errors go to the caller's
 * ErrorHandler as HTTPClient sends them. No retries, no TLS settings: a local test catalog.
 */
public class JdkRESTClient extends BaseHTTPClient {
  private final Map<String, String> props;
  private final HttpClient http;
  private final AuthSession session;

  public JdkRESTClient(Map<String, String> props) {
    this(props, HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build(), AuthSession.EMPTY);
  }

  private JdkRESTClient(Map<String, String> props, HttpClient http, AuthSession session) {
    this.props = props;
    this.http = http;
    this.session = session;
  }

  @Override
  public RESTClient withAuthSession(AuthSession authSession) {
    return new JdkRESTClient(props, http, authSession);
  }

  @Override
  protected HTTPRequest buildRequest(
      HTTPRequest.HTTPMethod method,
      String path,
      Map<String, String> query,
      Map<String, String> headers,
      Object body) {
    Map<String, String> all = new LinkedHashMap<>(headers == null ? Map.of() : headers);
    all.putIfAbsent("Accept", "application/json");
    // a Map body is a form (the OAuth2 token request); anything else is JSON
    all.putIfAbsent("Content-Type", body instanceof Map ? "application/x-www-form-urlencoded" : "application/json");
    RESTUtil.configHeaders(props).forEach(all::putIfAbsent);
    return session.authenticate(
        ImmutableHTTPRequest.builder()
            .baseUri(java.net.URI.create(RESTUtil.stripTrailingSlash(props.get("uri"))))
            .method(method)
            .path(path)
            .body(body)
            .queryParameters(query == null ? Map.of() : query)
            .headers(HTTPHeaders.of(all))
            .build());
  }

  @Override
  protected <T extends RESTResponse> T execute(
      HTTPRequest req, Class<T> type, Consumer<ErrorResponse> onError, Consumer<Map<String, String>> onHeaders) {
    return execute(req, type, onError, onHeaders, null);
  }

  @Override
  protected <T extends RESTResponse> T execute(
      HTTPRequest req,
      Class<T> type,
      Consumer<ErrorResponse> onError,
      Consumer<Map<String, String>> onHeaders,
      ParserContext context) {
    String body = req.encodedBody();
    HttpRequest.Builder builder =
        HttpRequest.newBuilder(req.requestUri())
            .method(
                req.method().name(),
                body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
    req.headers().entries().forEach(h -> builder.header(h.name(), h.value()));
    HttpResponse<String> answer;
    try {
      answer = http.send(builder.build(), HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new RESTException(e, "Error occurred while processing %s request", req.method());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new RESTException(e, "Interrupted %s request", req.method());
    }
    if (onHeaders != null) {
      Map<String, String> headers = new LinkedHashMap<>();
      answer.headers().map().forEach((k, v) -> headers.put(k, v.isEmpty() ? "" : v.get(0)));
      onHeaders.accept(headers);
    }
    int code = answer.statusCode();
    String text = answer.body();
    boolean ok = code == 200 || code == 202 || code == 204;
    if (!ok) {
      ErrorResponse error = null;
      if (onError instanceof ErrorHandler && text != null && !text.isEmpty()) {
        try {
          error = ((ErrorHandler) onError).parseResponse(code, text);
        } catch (RuntimeException e) {
          error = null; // not an Iceberg error body: reported with the raw text below
        }
      }
      if (error == null) {
        error = ErrorResponse.builder().responseCode(code).withMessage(text).withType("RESTException").build();
      }
      onError.accept(error); // throws the exception the error type maps to
      throw new RESTException("Unhandled error: %s", error);
    }
    if (code == 204 || type == null) {
      return null;
    }
    try {
      var reader = req.mapper().readerFor(type);
      return (context == null || context.isEmpty() ? reader : reader.with(context.toInjectableValues())).readValue(text);
    } catch (IOException e) {
      throw new RESTException(e, "Status %d but cannot parse body into %s", code, type.getSimpleName());
    }
  }

  @Override
  public void close() {
    session.close();
  }
}
