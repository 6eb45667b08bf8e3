package castable.rest;

import org.apache.iceberg.rest.RESTCatalog;

/**
 * Iceberg's RESTCatalog with its HTTP on the JDK (JdkRESTClient), for Spark's
 * spark.sql.catalog.NAME.catalog-impl. Nothing else differs from RESTCatalog: the tests use
 * Spark's default HadoopFileIO and let castable's catalog assign the new tables' field ids.
 *
 * <p>Why: the iceberg-spark-runtime jar on PyPI (snowpark-connect-deps-iceberg) leaves out the
 * shaded Apache HttpClient 5 that RESTCatalog's own HTTPClient needs; EMR's Iceberg jar has it.
 */
public class JdkRESTCatalog extends RESTCatalog {
  public JdkRESTCatalog() {
    super(JdkRESTClient::new);
  }
}
